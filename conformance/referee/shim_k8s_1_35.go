//go:build k8s_1_35

package main

// API glue for kubelet 1.35 (-tags k8s_1_35): the signatures that changed
// between releases, one small function each.

import (
	"context"
	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

type (
	machineInfo = cadvisorapi.MachineInfo
	cadvNode    = cadvisorapi.Node
	cadvCore    = cadvisorapi.Core
)

// podResourcesServed: kubelet.go serves PodResources unconditionally in this release.
func podResourcesServed() bool { return true }

func admitAttrs(pod *v1.Pod, others []*v1.Pod) *lifecycle.PodAdmitAttributes {
	return &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others}
}

func containerStarted(l klog.Logger, m *managers, pod *v1.Pod, c *v1.Container, id string) {
	m.cpu.AddContainer(l, pod, c, id)
	m.mem.AddContainer(l, pod, c, id)
	m.tm.AddContainer(pod, c, id)
}

// startDRAManager: the DRA manager's node getter takes no context in this release.
func startDRAManager(ctx context.Context, mgr *dra.Manager, pods func() []*v1.Pod, node func(context.Context) (*v1.Node, error), sr config.SourcesReady) error {
	return mgr.Start(ctx, pods, func() (*v1.Node, error) { return node(ctx) }, sr)
}
