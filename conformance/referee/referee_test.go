package main

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
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
		{`{"op":"reboot"}`, `unknown op "reboot"`},
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
	for in, want := range map[string]string{"v1.37.2": "1.37", "v1.34.4": "1.34", "devel": "devel"} {
		if got := release(in); got != want {
			t.Errorf("release(%q) = %q, want %q", in, got, want)
		}
	}
}
