//go:build k8s_1_34

package main

// API glue for kubelet 1.34 (-tags k8s_1_34): the signatures that changed
// between releases, one small function each.

import (
	"context"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	drastate "k8s.io/kubernetes/pkg/kubelet/cm/dra/state"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	"k8s.io/utils/cpuset"
)

type (
	machineInfo = cadvisorapi.MachineInfo
	cadvNode    = cadvisorapi.Node
	cadvCore    = cadvisorapi.Core
)

func addHintProvider(_ klog.Logger, tm topologymanager.Manager, h topologymanager.HintProvider) {
	tm.AddHintProvider(h)
}

func newCPUManager(_ klog.Logger, policy string, mi *machineInfo, reserved cpuset.CPUSet, reservation v1.ResourceList, dir string, tm topologymanager.Manager) (cpumanager.Manager, error) {
	return cpumanager.NewManager(policy, nil, cpuReconcilePeriod, mi, reserved, reservation, dir, tm)
}

func newMemoryManager(ctx context.Context, _ klog.Logger, mi *machineInfo, reservation v1.ResourceList, dir string, tm topologymanager.Manager) (memorymanager.Manager, error) {
	return memorymanager.NewManager(ctx, "None", mi, reservation, nil, dir, tm)
}

func startCPUManager(_ context.Context, m cpumanager.Manager, pods func() []*v1.Pod, sr config.SourcesReady, r *referee, rt runtimeStub, cmap containermap.ContainerMap) error {
	return m.Start(pods, sr, r, rt, cmap)
}

func startDeviceManager(_ klog.Logger, dm *devicemanager.ManagerImpl, pods func() []*v1.Pod, sr config.SourcesReady, cmap containermap.ContainerMap, running sets.Set[string]) error {
	return dm.Start(pods, sr, cmap, running)
}

func stopDeviceManager(_ klog.Logger, dm *devicemanager.ManagerImpl) error { return dm.Stop() }

func runPluginManager(_ context.Context, pm pluginmanager.PluginManager, sr config.SourcesReady, stop chan struct{}) {
	pm.Run(sr, stop)
}

// podResourcesServed: kubelet.go serves PodResources unconditionally in this release.
func podResourcesServed() bool { return true }

func admitAttrs(pod *v1.Pod, others []*v1.Pod) *lifecycle.PodAdmitAttributes {
	return &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others}
}

func newPredicateHandler(node func(context.Context) (*v1.Node, error), update func(*schedulerNodeInfo, *lifecycle.PodAdmitAttributes) error) lifecycle.PodAdmitHandler {
	return lifecycle.NewPredicateAdmitHandler(func() (*v1.Node, error) { return node(context.Background()) }, passThrough{}, update)
}

func runContainerOptions(_ context.Context, dm *devicemanager.ManagerImpl, pod *v1.Pod, c *v1.Container) (*devicemanager.DeviceRunContainerOptions, error) {
	return dm.GetDeviceRunContainerOptions(pod, c)
}

func containerStarted(_ klog.Logger, m *managers, pod *v1.Pod, c *v1.Container, id string) {
	m.cpu.AddContainer(pod, c, id)
	m.mem.AddContainer(context.Background(), pod, c, id)
	m.tm.AddContainer(pod, c, id)
}

// startDRAManager: the DRA manager's node getter takes no context in this release.
func startDRAManager(ctx context.Context, mgr *dra.Manager, pods func() []*v1.Pod, node func(context.Context) (*v1.Node, error), sr config.SourcesReady) error {
	return mgr.Start(ctx, pods, func() (*v1.Node, error) { return node(ctx) }, sr)
}

// setShareID: 1.34's DRA checkpoint has no ShareID.
func setShareID(*podresourcesv1.ClaimResource, drastate.Device) {}

// getFindsRejected: 1.34's kubeletPodsProvider.GetPodByName returns the pod
// manager's pod unfiltered (pkg/kubelet/kubelet.go), rejected pods included.
const getFindsRejected = true
