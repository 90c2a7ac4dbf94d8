//go:build !k8s_1_34

package main

// API glue shared by kubelets 1.35, 1.36 and 1.37 (1.34 had the older
// signatures: shim_k8s_1_34.go).

import (
	"context"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	drastate "k8s.io/kubernetes/pkg/kubelet/cm/dra/state"

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

func addHintProvider(l klog.Logger, tm topologymanager.Manager, h topologymanager.HintProvider) {
	tm.AddHintProvider(l, h)
}

func newCPUManager(l klog.Logger, policy string, mi *machineInfo, reserved cpuset.CPUSet, reservation v1.ResourceList, dir string, tm topologymanager.Manager) (cpumanager.Manager, error) {
	return cpumanager.NewManager(l, policy, nil, cpuReconcilePeriod, mi, reserved, reservation, dir, tm)
}

func newMemoryManager(_ context.Context, l klog.Logger, mi *machineInfo, reservation v1.ResourceList, dir string, tm topologymanager.Manager) (memorymanager.Manager, error) {
	return memorymanager.NewManager(l, "None", mi, reservation, nil, dir, tm)
}

func startCPUManager(ctx context.Context, m cpumanager.Manager, pods func() []*v1.Pod, sr config.SourcesReady, r *referee, rt runtimeStub, cmap containermap.ContainerMap) error {
	return m.Start(ctx, pods, sr, r, rt, cmap)
}

func startDeviceManager(l klog.Logger, dm *devicemanager.ManagerImpl, pods func() []*v1.Pod, sr config.SourcesReady, cmap containermap.ContainerMap, running sets.Set[string]) error {
	return dm.Start(l, pods, sr, cmap, running)
}

func stopDeviceManager(l klog.Logger, dm *devicemanager.ManagerImpl) error { return dm.Stop(l) }

func runPluginManager(ctx context.Context, pm pluginmanager.PluginManager, sr config.SourcesReady, stop chan struct{}) {
	pm.Run(ctx, sr, stop)
}

func newPredicateHandler(node func(context.Context) (*v1.Node, error), update func(*schedulerNodeInfo, *lifecycle.PodAdmitAttributes) error) lifecycle.PodAdmitHandler {
	return lifecycle.NewPredicateAdmitHandler(func(ctx context.Context, _ bool) (*v1.Node, error) { return node(ctx) }, passThrough{}, update)
}

func runContainerOptions(ctx context.Context, dm *devicemanager.ManagerImpl, pod *v1.Pod, c *v1.Container) (*devicemanager.DeviceRunContainerOptions, error) {
	return dm.GetDeviceRunContainerOptions(ctx, pod, c)
}

// setShareID: the PodResources ShareId from the DRA checkpoint (1.35+).
func setShareID(res *podresourcesv1.ClaimResource, d drastate.Device) {
	res.ShareId = (*string)(d.ShareID)
}

// getFindsRejected: from 1.35 kubeletPodsProvider.GetPodByName filters out
// inactive pods (isPodInactive, pkg/kubelet/kubelet.go): not a rejected one.
const getFindsRejected = false
