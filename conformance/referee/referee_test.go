package main

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Ops the kubelet's code cannot play, and lines that are not requests,
// answer an error carrying dpctl's usage exit code (2), in the shape of the
// Rust `Reply::Error`.
func TestRefusedRequestsAnswerUsageErrors(t *testing.T) {
	r := &referee{}
	client, server := net.Pipe()
	defer client.Close()
	go r.serve(server)
	lines := bufio.NewReader(client)
	for _, tc := range []struct{ line, says string }{
		{`{"op":"set_grace","grace_period_ms":2000}`, "endpointStopGracePeriod"},
		{`{"op":"dry_run","pod":{"name":"p","containers":[]}}`, "no dry run"},
		{`{"op":"fly"}`, `unknown op "fly"`},
		{`not json`, "bad control request"},
	} {
		if _, err := client.Write([]byte(tc.line + "\n")); err != nil {
			t.Fatal(err)
		}
		got, err := lines.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var reply struct {
			Error *remoteError `json:"error"`
		}
		if err := json.Unmarshal([]byte(got), &reply); err != nil || reply.Error == nil {
			t.Fatalf("%s: not an error reply: %s", tc.line, got)
		}
		if reply.Error.ExitCode != exitUsage || !strings.Contains(reply.Error.Message, tc.says) {
			t.Errorf("%s: got %+v", tc.line, reply.Error)
		}
	}
}

// The pod handed to the kubelet's code: requests default from limits (as
// the API server defaults them), sidecars are restartable init containers.
func TestPodFromSpec(t *testing.T) {
	uid := "u1"
	two := uint64(2000)
	pod := toPod(&podSpec{Name: "p", Namespace: "ns", UID: &uid, Containers: []containerSpec{
		{Name: "i", Kind: "init", Limits: map[string]uint64{"example.com/gpu": 1}},
		{Name: "s", Kind: "sidecar"},
		{Name: "c", Kind: "regular", Limits: map[string]uint64{"example.com/gpu": 2}, Compute: compute{CPULimitMillis: &two}},
	}})
	if len(pod.Spec.InitContainers) != 2 || len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers: %+v", pod.Spec)
	}
	if pod.Spec.InitContainers[0].RestartPolicy != nil || pod.Spec.InitContainers[1].RestartPolicy == nil ||
		*pod.Spec.InitContainers[1].RestartPolicy != v1.ContainerRestartPolicyAlways {
		t.Errorf("restart policies: %+v", pod.Spec.InitContainers)
	}
	c := pod.Spec.Containers[0]
	gpu := c.Resources.Requests[v1.ResourceName("example.com/gpu")]
	cpu := c.Resources.Requests[v1.ResourceCPU]
	if gpu.Value() != 2 || cpu.MilliValue() != 2000 {
		t.Errorf("requests: %v", c.Resources.Requests)
	}
	if string(pod.UID) != "u1" || pod.Namespace != "ns" {
		t.Errorf("meta: %+v", pod.ObjectMeta)
	}
}

func TestReleaseOfModuleVersion(t *testing.T) {
	for in, want := range map[string]string{"v1.37.2": "1.37", "v1.34.4": "1.34", "v1.38.0-beta.0": "1.38", "devel": "devel"} {
		if got := release(in); got != want {
			t.Errorf("release(%q) = %q, want %q", in, got, want)
		}
	}
}

func podNamed(name string) *admittedPod {
	return &admittedPod{spec: podSpec{Name: name, Namespace: "default"},
		pod: &v1.Pod{ObjectMeta: metav1ObjectMeta(name)}}
}

// A stopped start's managers see no pod and sources never ready, so the old
// CPU manager's reconcile loop (which has no stop) removes and writes nothing.
func TestStoppedGenerationSeesNothing(t *testing.T) {
	r := &referee{pods: []*admittedPod{podNamed("a")}}
	g := &generation{r: r}
	if len(g.activePods()) != 1 || !g.AllReady() {
		t.Fatalf("a live start sees the pods and ready sources")
	}
	r.sources.notReady.Store(true)
	if g.AllReady() {
		t.Errorf("sources not ready while the referee's are not")
	}
	r.sources.notReady.Store(false)
	g.stopped.Store(true)
	if len(g.activePods()) != 0 || g.AllReady() {
		t.Errorf("a stopped start still sees pods or ready sources")
	}
}

// While a restart re-admits, the active pods are those re-admitted so far
// plus the one being admitted (HandlePodAdditions).
func TestReadmissionSeesPodsSoFar(t *testing.T) {
	a, b, c := podNamed("a"), podNamed("b"), podNamed("c")
	r := &referee{pods: []*admittedPod{a, b, c}}
	r.readmitted = sets.New(string(a.pod.UID))
	r.pending = b.pod
	got := []string{}
	for _, p := range r.activePods() {
		got = append(got, p.Name)
	}
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("active pods during re-admission: %v", got)
	}
	if others := r.otherPods(b.pod); len(others) != 1 || others[0].Name != "a" {
		t.Errorf("b is judged against %v", others)
	}
}

// A rejected pod stays in the pod manager (phase Failed): GetPods lists it,
// List's active pods do not, and Get finds it only where the release's
// kubeletPodsProvider does not filter inactive pods (1.34).
func TestRejectedPodsInThePodManager(t *testing.T) {
	r := &referee{pods: []*admittedPod{podNamed("a")}}
	r.rejectLocked(podNamed("greedy").pod)
	p := podsProvider{r}
	if len(p.GetActivePods()) != 1 || len(p.GetPods()) != 2 {
		t.Fatalf("active %d, all %d", len(p.GetActivePods()), len(p.GetPods()))
	}
	pod, found := p.GetPodByName("default", "greedy")
	if found != getFindsRejected {
		t.Errorf("Get of a rejected pod: found %v on this release", found)
	}
	if found && pod.Status.Phase != v1.PodFailed {
		t.Errorf("a rejected pod's phase: %v", pod.Status.Phase)
	}
}

// Node allocatable memory keeps the default hard eviction threshold.
func TestAllocatableReservation(t *testing.T) {
	r := &referee{}
	mem := r.allocatableReservation()[v1.ResourceMemory]
	if mem.Value() != 100<<20 {
		t.Errorf("memory reservation %v", mem.String())
	}
	if _, ok := r.allocatableReservation()[v1.ResourceCPU]; ok {
		t.Errorf("no --reserved-cpus reserves no cpu")
	}
}

func metav1ObjectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)}
}
