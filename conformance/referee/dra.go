package main

// The kubelet's DRA manager (pkg/kubelet/cm/dra), wired as
// pkg/kubelet/cm/container_manager_linux.go wires it: created from the
// checkpoint in the kubelet's root directory, started with the active pods,
// its plugin handler registered for DRAPlugin with the plugin manager. The
// API server it reads ResourceClaims from is the referee's (apiserver.go),
// holding the ResourceClaims of every admitted pod's manifest. The pod
// worker's part is glue: PrepareResources before the containers start
// (SyncPod), GetResources at each container start (the CDI devices),
// UnprepareResources when a pod is deleted (SyncTerminatedPod). A kubelet
// restart prepares nothing: SyncPod calls PrepareDynamicResources only
// inside `if podContainerChanges.CreateSandbox`
// (pkg/kubelet/kuberuntime/kuberuntime_manager.go, SyncPod), and
// computePodActions keeps a running pod's sandbox, so the claims restored
// from the checkpoint are prepared again only for a new user of the claim or
// after a reboot (the sandboxes are gone: reboot.go admits every pod again).

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	draplugin "k8s.io/kubernetes/pkg/kubelet/cm/dra/plugin"
)

// claimRef, claimObject, allocation: the DRA part of the control
// protocol's pod (src/lib/kubelet_sim/dra_claims.rs serializes them).
type podClaimRef struct {
	Name              string `json:"name"`
	ResourceClaimName string `json:"resource_claim_name"`
}

type containerClaim struct {
	Name    string `json:"name"`
	Request string `json:"request"`
}

type allocationResult struct {
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
}

type claimObject struct {
	Namespace   string             `json:"namespace"`
	Name        string             `json:"name"`
	UID         string             `json:"uid"`
	Allocated   bool               `json:"allocated"`
	Results     []allocationResult `json:"results"`
	ReservedFor *[]string          `json:"reserved_for"`
}

// draOutcome is the sim's DraOutcome: the referee cannot see the calls
// (the driver's own record shows them), so `calls` stays empty.
type draOutcome struct {
	Calls      []jsonRaw           `json:"calls"`
	Error      *string             `json:"error"`
	CDIDevices map[string][]string `json:"cdi_devices"`
	Unprepared []string            `json:"unprepared,omitempty"`
}

func newDRAOutcome() *draOutcome {
	return &draOutcome{Calls: []jsonRaw{}, CDIDevices: map[string][]string{}}
}

// storeClaims puts the claims of a pod's manifest into the API server as
// written: a claim without status.reservedFor is reserved for no pod, and
// the DRA manager refuses it (IsReservedForPod in
// k8s.io/dynamic-resource-allocation/resourceclaim refuses an empty list).
func (r *referee) storeClaims(pod *podSpec) {
	for _, c := range pod.ClaimObjects {
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, UID: types.UID(c.UID)}}
		if c.Allocated {
			alloc := &resourceapi.AllocationResult{}
			for _, res := range c.Results {
				alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{
					Request: res.Request, Driver: res.Driver, Pool: res.Pool, Device: res.Device})
			}
			claim.Status.Allocation = alloc
		}
		if c.ReservedFor != nil {
			for _, uid := range *c.ReservedFor {
				claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", UID: types.UID(uid)})
			}
		}
		r.api.put(claim)
	}
}

// startDRA creates the DRA manager from the checkpoint in the state
// directory and starts it, as the container manager does at each kubelet
// start; its context ends with this kubelet's managers.
func (r *referee) startDRA(m *managers) error {
	ctx, cancel := context.WithCancel(m.ctx)
	mgr, err := dra.NewManager(r.logger, r.api, r.cfg.draStateDir)
	if err != nil {
		cancel()
		return fmt.Errorf("DRA manager: %w", err)
	}
	if err := startDRAManager(ctx, mgr, m.gen.activePods, r.nodeObject, m.gen); err != nil {
		cancel()
		return fmt.Errorf("start DRA manager: %w", err)
	}
	m.dra, m.draStop = mgr, cancel
	return nil
}

// nodeObject is the Node as the kubelet's node lister hands it to the DRA
// manager (which needs only its name, to wipe the node's ResourceSlices).
func (r *referee) nodeObject(context.Context) (*v1.Node, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.node.DeepCopy(), nil
}

func (r *referee) stopDRA(m *managers) {
	if m.dra == nil {
		return
	}
	stopDRAManager(m.dra)
	m.draStop()
}

// prepare is SyncPod's PrepareDynamicResources, then each container's CDI
// devices as GetResources hands them to the runtime (containers that name
// no claim are left out, as the sim does).
func (r *referee) prepare(m *managers, ap *admittedPod) *draOutcome {
	out := newDRAOutcome()
	if err := m.dra.PrepareResources(r.ctx, ap.pod); err != nil {
		out.Error = strp(err.Error())
		return out
	}
	for _, c := range ap.spec.Containers {
		if len(c.Claims) == 0 {
			continue
		}
		info, err := m.dra.GetResources(ap.pod, findContainer(ap.pod, c.Name))
		if err != nil {
			out.Error = strp(err.Error())
			return out
		}
		ids := []string{}
		for _, d := range info.CDIDevices {
			ids = append(ids, d.Name)
		}
		out.CDIDevices[c.Name] = ids
	}
	return out
}

// unprepare is SyncTerminatedPod's UnprepareDynamicResources.
func (r *referee) unprepare(m *managers, ap *admittedPod) *draOutcome {
	out := newDRAOutcome()
	if err := m.dra.UnprepareResources(r.ctx, ap.pod); err != nil {
		out.Error = strp(err.Error())
	}
	return out
}

// claimDrivers: the DRA drivers the admitted pods' claims name.
func (r *referee) claimDrivers() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	drivers := map[string]bool{}
	for _, p := range r.pods {
		for _, c := range p.spec.ClaimObjects {
			for _, res := range c.Results {
				drivers[res.Driver] = true
			}
		}
	}
	return sortedKeys(drivers)
}

// awaitDrivers waits (every 10 ms, at most until `deadline`) for every
// driver the admitted pods' claims name to be registered with this start's
// DRA plugin manager, and says whether all are.
func (r *referee) awaitDrivers(m *managers, deadline time.Time) bool {
	drivers := r.claimDrivers()
	pm, _ := m.dra.GetWatcherHandler().(*draplugin.DRAPluginManager)
	if pm == nil {
		return len(drivers) == 0
	}
	for {
		missing := false
		for _, d := range drivers {
			if _, err := pm.GetPlugin(d); err != nil {
				missing = true
			}
		}
		if !missing {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dynamicResources is the container manager's GetDynamicResources
// (container_manager_linux.go): every device of each claim the container
// names, with the CDI IDs gathered so far for that driver.
func dynamicResources(m *managers, pod *v1.Pod, c *v1.Container) []*podresourcesv1.DynamicResource {
	if m == nil || m.dra == nil {
		return []*podresourcesv1.DynamicResource{}
	}
	infos, err := m.dra.GetContainerClaimInfos(pod, c)
	if err != nil {
		return []*podresourcesv1.DynamicResource{}
	}
	var out []*podresourcesv1.DynamicResource
	for _, info := range infos {
		var resources []*podresourcesv1.ClaimResource
		drivers := make([]string, 0, len(info.DriverState))
		for d := range info.DriverState {
			drivers = append(drivers, d)
		}
		sort.Strings(drivers)
		for _, driver := range drivers {
			var cdi []*podresourcesv1.CDIDevice
			for _, d := range info.DriverState[driver].Devices {
				for _, id := range d.CDIDeviceIDs {
					cdi = append(cdi, &podresourcesv1.CDIDevice{Name: id})
				}
				res := &podresourcesv1.ClaimResource{CdiDevices: cdi, DriverName: driver, PoolName: d.PoolName, DeviceName: d.DeviceName}
				setShareID(res, d)
				resources = append(resources, res)
			}
		}
		out = append(out, &podresourcesv1.DynamicResource{ClaimName: info.ClaimName, ClaimNamespace: info.Namespace, ClaimResources: resources})
	}
	return out
}
