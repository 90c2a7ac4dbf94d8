package main

// The PodResources server as pkg/kubelet/server/server.go's
// ListenAndServePodResources builds it (rate limiter, v1alpha1 and v1
// services), over providers that hand the kubelet's managers through as
// pkg/kubelet/cm/container_manager_linux.go does.

import (
	"fmt"
	"os"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	kubeletutil "k8s.io/cri-client/pkg/util"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	podresourcesv1alpha1 "k8s.io/kubelet/pkg/apis/podresources/v1alpha1"
	apisgrpc "k8s.io/kubernetes/pkg/kubelet/apis/grpc"
	"k8s.io/kubernetes/pkg/kubelet/apis/podresources"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
)

func (r *referee) servePodResources(m *managers) (*grpc.Server, error) {
	providers := podresources.PodResourcesProviders{
		Pods:             podsProvider{r},
		Devices:          devicesProvider{r, m},
		Cpus:             cpusProvider{r, m},
		Memory:           memoryProvider{r, m},
		DynamicResources: dynamicProvider{m},
	}
	srv := grpc.NewServer(apisgrpc.WithRateLimiter(r.ctx, "podresources", podresources.DefaultQPS, podresources.DefaultBurstTokens))
	podresourcesv1alpha1.RegisterPodResourcesListerServer(srv, podresources.NewV1alpha1PodResourcesServer(providers))
	podresourcesv1.RegisterPodResourcesListerServer(srv, podresources.NewV1PodResourcesServer(r.ctx, providers))
	l, err := kubeletutil.CreateListener("unix://" + r.cfg.podresourcesSocket)
	if err != nil {
		return nil, fmt.Errorf("failed to create listener for podResources endpoint: %w", err)
	}
	go func() {
		if err := srv.Serve(l); err != nil {
			fmt.Fprintf(os.Stderr, "podresources: %v\n", err)
		}
	}()
	return srv, nil
}

// podsProvider is the kubelet's kubeletPodsProvider (pkg/kubelet/kubelet.go)
// over the referee's pods: GetActivePods is the kubelet's GetActivePods,
// GetPods the pod manager's every pod (rejected ones too).
type podsProvider struct{ r *referee }

func (p podsProvider) GetActivePods() []*v1.Pod { return p.r.activePods() }
func (p podsProvider) GetPods() []*v1.Pod {
	out := p.r.activePods()
	p.r.mu.RLock()
	defer p.r.mu.RUnlock()
	for _, key := range sortedKeys(p.r.rejected) {
		out = append(out, p.r.rejected[key])
	}
	return out
}

// GetPodByName: the pod manager's pod of that name; from 1.35 the kubelet
// filters it as GetActivePods does (isPodInactive), so a rejected pod
// (phase Failed) is not found; 1.34 returns it (getFindsRejected).
func (p podsProvider) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	if _, ap := p.r.findPod(namespace, name); ap != nil {
		return ap.pod, true
	}
	if !getFindsRejected {
		return nil, false
	}
	p.r.mu.RLock()
	defer p.r.mu.RUnlock()
	pod, ok := p.r.rejected[namespace+"/"+name]
	return pod, ok
}

type devicesProvider struct {
	r *referee
	m *managers
}

type cpusProvider struct {
	r *referee
	m *managers
}

type memoryProvider struct {
	r *referee
	m *managers
}

// dynamicProvider hands the DRA manager's claims through (dra.go).
type dynamicProvider struct{ m *managers }

// containerDevices turns the device manager's devices into the API's
// entries: one per device and NUMA node (a device without topology gets
// one entry without topology).
func containerDevices(devs devicemanager.ResourceDeviceInstances) []*podresourcesv1.ContainerDevices {
	var out []*podresourcesv1.ContainerDevices
	for res, byID := range devs {
		for id, d := range byID {
			nodes := d.GetTopology().GetNodes()
			if d.GetTopology() == nil {
				out = append(out, &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: []string{id}})
			}
			for _, n := range nodes {
				out = append(out, &podresourcesv1.ContainerDevices{ResourceName: res, DeviceIds: []string{id},
					Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: n.GetID()}}}})
			}
		}
	}
	return out
}

func int64s(ids []int) []int64 {
	out := make([]int64, 0, len(ids))
	for _, id := range ids {
		out = append(out, int64(id))
	}
	return out
}
