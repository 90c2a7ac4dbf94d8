package main

// A node reboot, played on the kubelet's own managers: the containers are
// gone (no running container, nothing in the runtime's container map), the
// checkpoint in the device-plugin directory is kept, the managers start
// fresh on it, and every pod is admitted again, one at a time, in the order
// given (the kubelet's own order is creation order, HandlePodAdditions in
// pkg/kubelet/kubelet.go). Plugins come back whenever they do: a scenario
// stops its plugin before the reboot to play one that comes back late.

import (
	"os"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
)

type rebootReport struct {
	Result string         `json:"result"`
	Pods   []admitOutcome `json:"pods"`
}

// rebootOrder: the pods in `order` (names, default namespace unless
// "ns/name"), or in admission order when it is empty.
func rebootOrder(pods []*admittedPod, order []string) ([]*admittedPod, *opError) {
	if len(order) == 0 {
		return pods, nil
	}
	byName := map[string]*admittedPod{}
	for _, p := range pods {
		byName[p.spec.Namespace+"/"+p.spec.Name] = p
		if p.spec.Namespace == "default" {
			byName[p.spec.Name] = p
		}
	}
	out := make([]*admittedPod, 0, len(order))
	seen := map[*admittedPod]bool{}
	for _, n := range order {
		p, ok := byName[n]
		if !ok || seen[p] {
			return nil, invalid("reboot order", "%q is not an admitted pod (or is named twice)", n)
		}
		seen[p] = true
		out = append(out, p)
	}
	if len(out) != len(pods) {
		return nil, invalid("reboot order", "names %d of the %d admitted pods: name every one", len(out), len(pods))
	}
	return out, nil
}

// reboot: `after` is how long the kubelet takes from its fresh start to
// admitting the pods again (plugins registering meanwhile are back in time).
func (r *referee) reboot(order []string, after time.Duration) (*rebootReport, *opError) {
	r.mu.RLock()
	old := r.m
	pods := append([]*admittedPod(nil), r.pods...)
	r.mu.RUnlock()
	ordered, e := rebootOrder(pods, order)
	if e != nil {
		return nil, e
	}
	r.stop(old)
	// The pods come back as the first batch of the new kubelet's pod
	// sources, admitted before the sources count as ready (see readmit.go).
	r.sources.notReady.Store(true)
	defer r.sources.notReady.Store(false)
	m, err := r.start(containermap.NewContainerMap(), sets.New[string]())
	if err != nil {
		r.logger.Error(err, "reboot failed")
		os.Exit(1)
	}
	r.mu.Lock()
	r.m = m
	r.restarts++
	r.pods = nil
	r.mu.Unlock()
	time.Sleep(after)
	rep := &rebootReport{Result: "reboot", Pods: []admitOutcome{}}
	for _, p := range ordered {
		out, e := r.admit(p.spec)
		if e != nil {
			return nil, e
		}
		rep.Pods = append(rep.Pods, *out)
	}
	return rep, nil
}
