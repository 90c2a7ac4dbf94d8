//go:build k8s_1_34 || k8s_1_35 || k8s_1_36

package main

// API glue shared by kubelets 1.34, 1.35 and 1.36 (1.37 changed these
// signatures: shim_k8s_1_37.go).

import (
	"context"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/nodestatus"
)

func newTopologyManager(_ klog.Logger, topo []cadvNode, policy, scope string, opts map[string]string) (topologymanager.Manager, error) {
	return topologymanager.NewManager(topo, policy, scope, opts)
}

func newDeviceManager(_ klog.Logger, topo []cadvNode, tm topologymanager.Manager) (*devicemanager.ManagerImpl, error) {
	return devicemanager.NewManagerImpl(topo, tm)
}

func deviceCapacity(_ klog.Logger, dm *devicemanager.ManagerImpl) (v1.ResourceList, v1.ResourceList, []string) {
	return dm.GetCapacity()
}

func admitWith(_ context.Context, h lifecycle.PodAdmitHandler, attrs *lifecycle.PodAdmitAttributes) lifecycle.PodAdmitResult {
	return h.Admit(attrs)
}

func (passThrough) HandleAdmissionFailure(_ context.Context, _ *v1.Pod, reasons []lifecycle.PredicateFailureReason) ([]lifecycle.PredicateFailureReason, error) {
	return reasons, nil
}

func (r *referee) nodeSetter(m *managers) nodestatus.Setter {
	capacity := func(bool) v1.ResourceList { return cadvisor.CapacityFromMachineInfo(r.machine) }
	return nodestatus.MachineInfo(r.node.Name, 110, 0,
		func() (*machineInfo, error) { return r.machine, nil }, capacity,
		m.dm.GetCapacity, r.allocatableReservation, func(string, string, string) {}, false)
}

func containerStopped(_ klog.Logger, m *managers, id string) error { return m.tm.RemoveContainer(id) }

func (p devicesProvider) UpdateAllocatedDevices() { p.m.dm.UpdateAllocatedDevices() }

func (p devicesProvider) GetAllocatableDevices() []*podresourcesv1.ContainerDevices {
	return containerDevices(p.m.dm.GetAllocatableDevices())
}

func (p cpusProvider) GetCPUs(uid, name string) []int64 {
	return int64s(p.m.cpu.GetExclusiveCPUs(uid, name).UnsortedList())
}

// The memory manager is not played (policy None): PodResources reports
// no memory, as a kubelet with that policy does.
func (memoryProvider) GetMemory(string, string) []*podresourcesv1.ContainerMemory {
	return []*podresourcesv1.ContainerMemory{}
}

func (memoryProvider) GetAllocatableMemory() []*podresourcesv1.ContainerMemory {
	return []*podresourcesv1.ContainerMemory{}
}

func (p dynamicProvider) GetDynamicResources(pod *v1.Pod, c *v1.Container) []*podresourcesv1.DynamicResource {
	return dynamicResources(p.m, pod, c)
}

// stopDRAManager: before 1.37 the DRA manager has no Stop; its context ends it.
func stopDRAManager(*dra.Manager) {}
