package main

// A kubelet restart with pods still running: the new kubelet gets every pod
// again from its sources as an ADD (HandlePodAdditions in
// pkg/kubelet/kubelet.go) and runs the admit handlers on each before its
// sources are ready (the sync loop marks a source seen only after handling
// its first update). The device manager was started with the containers the
// runtime reports (the container map and the running set), so from 1.27 its
// devicesToAllocate skips the containers found running
// (isContainerAlreadyRunning) and checks the others' devices, such as a plain
// init container that ran to completion. A rejected pod is killed.

import (
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// sourcesGate is the kubelet's config.SourcesReady: ready except while a
// restart re-admits its pods (the first pod list of the new kubelet).
type sourcesGate struct{ notReady atomic.Bool }

func (g *sourcesGate) AddSource(string) {}
func (g *sourcesGate) AllReady() bool   { return !g.notReady.Load() }

// readmitAll runs the admit handlers again on every admitted pod, in
// admission order, with their containers still running, and reports each
// pod's verdict with its containers (running or not, the devices the device
// manager holds for them). The new kubelet's pod manager holds only the pods
// handed to it so far (HandlePodAdditions adds each before admitting it and
// admits it against GetActivePods), so each pod is judged against the pods
// re-admitted before it, and the managers see those as the active pods.
func (r *referee) readmitAll(m *managers) []admitOutcome {
	r.mu.Lock()
	pods := append([]*admittedPod(nil), r.pods...)
	r.readmitted = sets.New[string]()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.readmitted = nil
		r.mu.Unlock()
	}()
	out := []admitOutcome{}
	for _, ap := range pods {
		began := time.Now()
		r.mu.Lock()
		r.pending = ap.pod
		r.mu.Unlock()
		attrs := admitAttrs(ap.pod, r.otherPods(ap.pod))
		result := lifecycle.PodAdmitResult{Admit: true}
		for _, h := range m.admitters {
			if result = admitWith(r.ctx, h, attrs); !result.Admit {
				break
			}
		}
		r.mu.Lock()
		r.pending = nil
		if result.Admit {
			r.readmitted.Insert(string(ap.pod.UID))
		}
		r.mu.Unlock()
		o := admitOutcome{Result: "admit", Pod: ap.spec.Name, Namespace: ap.spec.Namespace, UID: string(ap.pod.UID),
			Admitted: result.Admit, Containers: []containerOutcome{}}
		r.mu.RLock()
		for _, c := range ap.spec.Containers {
			running := ap.running[c.Name]
			co := r.containerOutcome(m, ap, c, nil)
			co.Running = &running
			o.Containers = append(o.Containers, co)
		}
		r.mu.RUnlock()
		if !result.Admit {
			o.Reason, o.Message = strp(result.Reason), strp(result.Message)
			r.kill(m, ap)
		}
		o.TookMs = uint64(time.Since(began).Milliseconds())
		out = append(out, o)
	}
	return out
}

// kill: a pod rejected at its re-admission is killed; it leaves the active
// pods (rejectPod sets its phase Failed; the pod manager keeps it), so the
// device manager frees its devices once its sources are ready.
func (r *referee) kill(m *managers, ap *admittedPod) {
	for _, id := range ap.ids {
		_ = containerStopped(r.logger, m, id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, p := range r.pods {
		if p == ap {
			r.pods = append(r.pods[:i], r.pods[i+1:]...)
			break
		}
	}
	r.deleted.Insert(string(ap.pod.UID))
	r.rejectLocked(ap.pod)
}

// rejectLocked keeps a rejected pod in the pod manager, phase Failed
// (rejectPod in pkg/kubelet/kubelet.go), under its namespace/name; r.mu held.
func (r *referee) rejectLocked(pod *v1.Pod) {
	failed := pod.DeepCopy()
	failed.Status.Phase = v1.PodFailed
	if r.rejected == nil {
		r.rejected = map[string]*v1.Pod{}
	}
	r.rejected[pod.Namespace+"/"+pod.Name] = failed
}
