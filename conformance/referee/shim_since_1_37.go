//go:build !k8s_1_34 && !k8s_1_35 && !k8s_1_36

package main

// API glue for kubelet 1.37 (the default go.mod) and 1.38 (-tags k8s_1_38,
// v1.38.0-beta.0: none of the signatures the referee calls changed): the
// signatures that changed between releases, one small function each.

import (
	"context"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/config"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	cmqos "k8s.io/kubernetes/pkg/kubelet/cm/qos"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/nodestatus"
)

type (
	machineInfo = cadvisorapi.MachineInfo
	cadvNode    = cadvisorapi.Node
	cadvCore    = cadvisorapi.Core
)

func newTopologyManager(l klog.Logger, topo []cadvNode, policy, scope string, opts map[string]string) (topologymanager.Manager, error) {
	return topologymanager.NewManager(l, topo, policy, scope, opts)
}

func newDeviceManager(l klog.Logger, topo []cadvNode, tm topologymanager.Manager) (*devicemanager.ManagerImpl, error) {
	return devicemanager.NewManagerImpl(l, topo, tm)
}

func deviceCapacity(l klog.Logger, dm *devicemanager.ManagerImpl) (v1.ResourceList, v1.ResourceList, []string) {
	return dm.GetCapacity(l)
}

// podResourcesServed: kubelet.go's ListenAndServePodResources serves only
// with the KubeletPodResourcesGet gate on in this release.
func podResourcesServed() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.KubeletPodResourcesGet)
}

func admitAttrs(pod *v1.Pod, others []*v1.Pod) *lifecycle.PodAdmitAttributes {
	return &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others, Operation: lifecycle.AddOperation}
}

func admitWith(ctx context.Context, h lifecycle.PodAdmitHandler, attrs *lifecycle.PodAdmitAttributes) lifecycle.PodAdmitResult {
	return h.Admit(ctx, attrs)
}

func (passThrough) HandleAdmissionFailure(_ context.Context, _ *v1.Pod, reasons []lifecycle.PredicateFailureReason, _ lifecycle.Operation) ([]lifecycle.PredicateFailureReason, error) {
	return reasons, nil
}

func (r *referee) nodeSetter(m *managers) nodestatus.Setter {
	capacity := func(klog.Logger, bool) v1.ResourceList { return cadvisor.CapacityFromMachineInfo(r.machine) }
	return nodestatus.MachineInfo(r.node.Name, 110, 0,
		func() (*machineInfo, error) { return r.machine, nil }, capacity,
		m.dm.GetCapacity, r.allocatableReservation, func(string, string, string) {}, func() *bool { return nil }, false)
}

func containerStarted(l klog.Logger, m *managers, pod *v1.Pod, c *v1.Container, id string) {
	m.cpu.AddContainer(l, pod, c, id)
	m.mem.AddContainer(l, pod, c, id)
	m.tm.AddContainer(l, pod, c, id)
}

func containerStopped(l klog.Logger, m *managers, id string) error {
	return m.tm.RemoveContainer(l, id)
}

func (p devicesProvider) UpdateAllocatedDevices(l klog.Logger) { p.m.dm.UpdateAllocatedDevices(l) }

func (p devicesProvider) GetAllocatableDevices(l klog.Logger) []*podresourcesv1.ContainerDevices {
	return containerDevices(p.m.dm.GetAllocatableDevices(l))
}

// Exclusive CPUs only for containers the CPU manager isolates, as the
// container manager reports them.
func (p cpusProvider) GetCPUs(pod *v1.Pod, c *v1.Container) []int64 {
	if p.m.cpu.GetResourceIsolationLevel(pod, c) != cmqos.ResourceIsolationContainer {
		return []int64{}
	}
	return int64s(p.m.cpu.GetExclusiveCPUs(string(pod.UID), c.Name).UnsortedList())
}

func (p cpusProvider) GetPodCPUs(uid string) []int64 {
	return int64s(p.m.cpu.GetPodCPUs(uid).UnsortedList())
}

// The memory manager is not played (policy None): PodResources reports
// no memory, as a kubelet with that policy does.
func (memoryProvider) GetMemory(klog.Logger, *v1.Pod, *v1.Container) []*podresourcesv1.ContainerMemory {
	return []*podresourcesv1.ContainerMemory{}
}

func (memoryProvider) GetPodMemory(klog.Logger, string) []*podresourcesv1.ContainerMemory {
	return []*podresourcesv1.ContainerMemory{}
}

func (memoryProvider) GetAllocatableMemory(klog.Logger) []*podresourcesv1.ContainerMemory {
	return []*podresourcesv1.ContainerMemory{}
}

func (p dynamicProvider) GetDynamicResources(_ klog.Logger, pod *v1.Pod, c *v1.Container) []*podresourcesv1.DynamicResource {
	return dynamicResources(p.m, pod, c)
}

// startDRAManager: the DRA manager's node getter takes a context from 1.36.
func startDRAManager(ctx context.Context, mgr *dra.Manager, pods func() []*v1.Pod, node func(context.Context) (*v1.Node, error), sr config.SourcesReady) error {
	return mgr.Start(ctx, pods, node, sr)
}

// stopDRAManager: 1.37's DRA manager stops its plugin manager and waits for it.
func stopDRAManager(mgr *dra.Manager) { mgr.Stop() }
