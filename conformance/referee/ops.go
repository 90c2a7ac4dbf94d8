package main

// The control operations: admit, delete, restart, restart_container, status.

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/checkpointmanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/checkpoint"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

type typesUID = types.UID

// opError is an error answer: its message and dpctl's exit code.
type opError struct {
	code uint8
	msg  string
}

func (e *opError) Error() string { return e.msg }

func invalid(place, format string, args ...any) *opError {
	return &opError{code: exitUsage, msg: place + ": " + fmt.Sprintf(format, args...)}
}

// toPod builds the v1.Pod the API server would hand the kubelet for `spec`:
// extended resources in limits and requests (the API server defaults
// requests from limits), CPU and memory as given, defaulted the same way.
func toPod(spec *podSpec) *v1.Pod {
	pod := &v1.Pod{
		TypeMeta:   metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: spec.Name, Namespace: spec.Namespace, UID: types.UID(*spec.UID), CreationTimestamp: metav1.Now()},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}
	always := v1.ContainerRestartPolicyAlways
	for _, pc := range spec.ResourceClaims {
		pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, v1.PodResourceClaim{Name: pc.Name, ResourceClaimName: strp(pc.ResourceClaimName)})
	}
	for _, c := range spec.Containers {
		limits, requests := v1.ResourceList{}, v1.ResourceList{}
		for name, n := range c.Limits {
			q := *resource.NewQuantity(int64(n), resource.DecimalSI)
			limits[v1.ResourceName(name)] = q
			requests[v1.ResourceName(name)] = q
		}
		set := func(name v1.ResourceName, req, lim *uint64, milli bool) {
			mk := func(v uint64) resource.Quantity {
				if milli {
					return *resource.NewMilliQuantity(int64(v), resource.DecimalSI)
				}
				return *resource.NewQuantity(int64(v), resource.BinarySI)
			}
			if lim != nil {
				limits[name] = mk(*lim)
				if req == nil {
					requests[name] = mk(*lim)
				}
			}
			if req != nil {
				requests[name] = mk(*req)
			}
		}
		set(v1.ResourceCPU, c.Compute.CPURequestMillis, c.Compute.CPULimitMillis, true)
		set(v1.ResourceMemory, c.Compute.MemoryRequest, c.Compute.MemoryLimit, false)
		vc := v1.Container{Name: c.Name, Image: "referee", Resources: v1.ResourceRequirements{Limits: limits, Requests: requests}}
		for _, cl := range c.Claims {
			vc.Resources.Claims = append(vc.Resources.Claims, v1.ResourceClaim{Name: cl.Name, Request: cl.Request})
		}
		switch c.Kind {
		case "regular":
			pod.Spec.Containers = append(pod.Spec.Containers, vc)
		case "sidecar":
			vc.RestartPolicy = &always
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, vc)
		default:
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, vc)
		}
	}
	return pod
}

func validatePod(spec *podSpec) *opError {
	if spec.Name == "" {
		return invalid("pod", "metadata.name is empty")
	}
	if spec.Namespace == "" {
		spec.Namespace = "default"
	}
	place := fmt.Sprintf("pod %s/%s", spec.Namespace, spec.Name)
	seen := map[string]bool{}
	regular := false
	for _, c := range spec.Containers {
		if c.Name == "" {
			return invalid(place, "a container has no name")
		}
		if seen[c.Name] {
			return invalid(place, "container name %q is used twice", c.Name)
		}
		seen[c.Name] = true
		switch c.Kind {
		case "regular":
			regular = true
		case "init", "sidecar":
			if regular {
				return invalid(place, "init containers must come before regular containers")
			}
		default:
			return invalid(place, "container %q: unknown kind %q (init, sidecar, regular)", c.Name, c.Kind)
		}
	}
	if !regular {
		return invalid(place, "a pod needs at least one regular container (spec.containers)")
	}
	return nil
}

func strp(s string) *string { return &s }

// devicesOf is the device manager's record of a container's devices, per resource.
func (r *referee) devicesOf(m *managers, uid types.UID, container string) map[string][]string {
	out := map[string][]string{}
	for res, devs := range m.dm.GetDevices(string(uid), container) {
		ids := make([]string, 0, len(devs))
		for id := range devs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		out[res] = ids
	}
	return out
}

// allocations reads the Allocate answers the device manager checkpointed
// for a pod: container -> resource -> answer.
func allocations(uid types.UID) map[string]map[string]*containerAllocation {
	out := map[string]map[string]*containerAllocation{}
	entries, err := readCheckpoint(filepath.Join(devicePluginsDir, checkpointName))
	if err != nil {
		return out
	}
	for _, e := range entries {
		if e.PodUID != string(uid) || len(e.AllocResp) == 0 {
			continue
		}
		var resp pluginapi.ContainerAllocateResponse
		if proto.Unmarshal(e.AllocResp, &resp) != nil {
			continue
		}
		a := &containerAllocation{DevicesIDs: sets.List(e.DeviceIDs.Devices()), Envs: map[string]string{},
			Mounts: []mount{}, Devices: []deviceSpec{}, Annotations: map[string]string{}, CDIDevices: []string{}}
		for k, v := range resp.Envs {
			a.Envs[k] = v
		}
		for k, v := range resp.Annotations {
			a.Annotations[k] = v
		}
		for _, m := range resp.Mounts {
			a.Mounts = append(a.Mounts, mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly})
		}
		for _, d := range resp.Devices {
			a.Devices = append(a.Devices, deviceSpec{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
		}
		for _, c := range resp.CdiDevices {
			a.CDIDevices = append(a.CDIDevices, c.Name)
		}
		if out[e.ContainerName] == nil {
			out[e.ContainerName] = map[string]*containerAllocation{}
		}
		out[e.ContainerName][e.ResourceName] = a
	}
	return out
}

func readCheckpoint(path string) ([]checkpoint.PodDevicesEntry, error) {
	dir, name := filepath.Split(path)
	mgr, err := checkpointmanager.NewCheckpointManager(dir)
	if err != nil {
		return nil, err
	}
	cp := checkpoint.New(nil, nil)
	if err := mgr.GetCheckpoint(name, cp); err != nil {
		return nil, err
	}
	entries, _ := cp.GetData()
	return entries, nil
}

// admit runs the kubelet's admit handlers on the pod, then starts its
// containers as the kubelet's pod worker does: init containers one after
// the other (stopping at the first that fails), then the regular ones.
func (r *referee) admit(spec podSpec) (*admitOutcome, *opError) {
	if e := validatePod(&spec); e != nil {
		return nil, e
	}
	if _, p := r.findPod(spec.Namespace, spec.Name); p != nil {
		return nil, invalid(fmt.Sprintf("pod %s/%s", spec.Namespace, spec.Name), "is already admitted; delete it first")
	}
	if spec.UID == nil || *spec.UID == "" {
		spec.UID = strp(uuid.NewString())
	}
	began := time.Now()
	r.storeClaims(&spec)
	pod := toPod(&spec)
	r.mu.Lock()
	m := r.m
	r.pending = pod
	r.mu.Unlock()
	attrs := admitAttrs(pod, r.otherPods(pod))
	result := lifecycle.PodAdmitResult{Admit: true}
	for _, h := range m.admitters {
		if result = admitWith(r.ctx, h, attrs); !result.Admit {
			break
		}
	}
	out := &admitOutcome{Result: "admit", Pod: spec.Name, Namespace: spec.Namespace, UID: *spec.UID, Admitted: result.Admit, Containers: []containerOutcome{}}
	ap := &admittedPod{spec: spec, pod: pod, ids: map[string]string{}, running: map[string]bool{}}
	r.mu.Lock()
	r.pending = nil
	delete(r.rejected, spec.Namespace+"/"+spec.Name)
	if result.Admit {
		pod.Status.Phase = v1.PodRunning
		r.pods = append(r.pods, ap)
	} else {
		r.rejectLocked(pod)
	}
	r.mu.Unlock()
	if !result.Admit {
		out.Reason, out.Message = strp(result.Reason), strp(result.Message)
		// What the device manager holds for the rejected pod (until it next
		// drops inactive pods), per container that got something.
		for _, c := range spec.Containers {
			co := r.containerOutcome(m, ap, c, nil)
			if len(co.Resources) > 0 {
				out.Containers = append(out.Containers, co)
			}
		}
		out.TookMs = uint64(time.Since(began).Milliseconds())
		return out, nil
	}
	allocs := allocations(pod.UID)
	// SyncPod prepares the pod's claims before any container starts; a
	// failure keeps them all from starting.
	if len(spec.ResourceClaims) > 0 {
		out.Dra = r.prepare(m, ap)
	}
	// The pod worker starts init containers one at a time and a regular
	// container only once every init container completed (sidecars:
	// started): computeInitContainerActions in
	// pkg/kubelet/kuberuntime/kuberuntime_container.go returns before any
	// regular container is considered while an init container has not
	// succeeded. A container that failed to start is retried with backoff,
	// never skipped, so nothing after it starts.
	initFailed := false
	for _, c := range spec.Containers {
		co := r.containerOutcome(m, ap, c, allocs[c.Name])
		if out.Dra != nil && out.Dra.Error != nil {
			co.StartError = out.Dra.Error
		} else if !initFailed {
			r.startContainer(m, ap, c, &co)
			if !co.Started && c.Kind != "regular" {
				initFailed = true
			}
		}
		out.Containers = append(out.Containers, co)
	}
	out.TookMs = uint64(time.Since(began).Milliseconds())
	return out, nil
}

func (r *referee) containerOutcome(m *managers, ap *admittedPod, c containerSpec, allocs map[string]*containerAllocation) containerOutcome {
	co := containerOutcome{Name: c.Name, Kind: c.Kind, Resources: []resourceOutcome{}}
	held := r.devicesOf(m, ap.pod.UID, c.Name)
	names := make([]string, 0, len(c.Limits))
	for n := range c.Limits {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ids, ok := held[n]
		if !ok {
			continue
		}
		co.Resources = append(co.Resources, resourceOutcome{Resource: n, Requested: c.Limits[n], Reused: []string{},
			Devices: ids, Allocation: allocs[n], Warnings: []jsonRaw{}})
	}
	return co
}

// startContainer is the kubelet starting one container: the device
// manager's run options (PreStartContainer for plugins that need it), then
// the internal container lifecycle's PreStartContainer (CPU, memory and
// Topology Manager learn the container ID).
func (r *referee) startContainer(m *managers, ap *admittedPod, c containerSpec, co *containerOutcome) {
	vc := findContainer(ap.pod, c.Name)
	if _, err := runContainerOptions(r.ctx, m.dm, ap.pod, vc); err != nil {
		co.StartError = strp(err.Error())
		return
	}
	// GetDeviceRunContainerOptions called PreStartContainer for every
	// resource of the container whose plugin asked for it, and all answered.
	for i := range co.Resources {
		if e, ok := r.events.last(co.Resources[i].Resource, "registered"); ok && e.PreStartRequired && len(co.Resources[i].Devices) > 0 {
			co.Resources[i].PreStart = strp("ok")
		}
	}
	id := r.newContainerID()
	containerStarted(r.logger, m, ap.pod, vc, id)
	r.mu.Lock()
	if old, ok := ap.ids[c.Name]; ok && old != id {
		r.mu.Unlock()
		_ = containerStopped(r.logger, m, old)
		r.mu.Lock()
	}
	ap.ids[c.Name] = id
	// A plain init container runs to completion; the others keep running.
	ap.running[c.Name] = c.Kind != "init"
	r.mu.Unlock()
	co.Started = true
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return nil
}

func (r *referee) notFound(namespace, name string) *opError {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.pods) == 0 {
		return invalid(fmt.Sprintf("pod %s/%s", namespace, name), "not found (no pods are admitted)")
	}
	var known []string
	for _, p := range r.pods {
		known = append(known, p.spec.Namespace+"/"+p.spec.Name)
	}
	return invalid(fmt.Sprintf("pod %s/%s", namespace, name), "not found (admitted: %s)", strings.Join(known, ", "))
}

// del deletes a pod: the pod worker's SyncTerminatingPod
// (pkg/kubelet/kubelet.go) stops its containers (the Topology Manager
// forgets them), then unprepares its claims; only when that returns nil is
// the pod known terminated and out of the active pods, so the device
// manager frees its devices the next time it looks
// (UpdateAllocatedDevices), as in the kubelet. When the unprepare fails,
// SyncTerminatingPod returns the error: the pod stays active (terminating)
// and keeps its devices, and the pod worker tries again (here: the next
// delete of the pod).
func (r *referee) del(namespace, name string) (*deleteOutcome, *opError) {
	i, ap := r.findPod(namespace, name)
	if ap == nil {
		return nil, r.notFound(namespace, name)
	}
	r.mu.RLock()
	m := r.m
	r.mu.RUnlock()
	out := &deleteOutcome{Result: "delete", Pod: name, Namespace: namespace, Freed: map[string][]string{}}
	r.mu.Lock()
	ids := ap.ids
	ap.ids = map[string]string{}
	ap.running = map[string]bool{}
	r.mu.Unlock()
	for _, id := range ids {
		_ = containerStopped(r.logger, m, id)
	}
	if len(ap.spec.ResourceClaims) > 0 {
		out.Dra = r.unprepare(m, ap)
		if out.Dra.Error != nil {
			return out, nil
		}
	}
	for _, c := range ap.spec.Containers {
		for res, ids := range r.devicesOf(m, ap.pod.UID, c.Name) {
			out.Freed[res] = sets.List(sets.New(append(out.Freed[res], ids...)...))
		}
	}
	r.mu.Lock()
	if i, _ = r.indexOf(ap); i >= 0 {
		r.pods = append(r.pods[:i], r.pods[i+1:]...)
	}
	r.deleted.Insert(string(ap.pod.UID))
	r.mu.Unlock()
	return out, nil
}

// indexOf: where ap is in r.pods (-1 when gone); r.mu held.
func (r *referee) indexOf(ap *admittedPod) (int, bool) {
	for i, p := range r.pods {
		if p == ap {
			return i, true
		}
	}
	return -1, false
}

// restartContainer starts one container of an admitted pod again.
func (r *referee) restartContainer(namespace, name, container string) (*restartOutcome, *opError) {
	_, ap := r.findPod(namespace, name)
	if ap == nil {
		return nil, r.notFound(namespace, name)
	}
	var spec *containerSpec
	var names []string
	for i := range ap.spec.Containers {
		names = append(names, ap.spec.Containers[i].Name)
		if ap.spec.Containers[i].Name == container {
			spec = &ap.spec.Containers[i]
		}
	}
	if spec == nil {
		return nil, invalid(fmt.Sprintf("pod %s/%s", namespace, name), "has no container %q (containers: %s)", container, strings.Join(names, ", "))
	}
	r.mu.RLock()
	m := r.m
	r.mu.RUnlock()
	co := containerOutcome{}
	r.startContainer(m, ap, *spec, &co)
	return &restartOutcome{Result: "restart_container", Pod: name, Namespace: namespace, Container: container,
		PreStart: map[string]string{}, Started: co.Started, StartError: co.StartError}, nil
}

// status reports what the kubelet's code exposes: node capacity and
// allocatable as its node-status setter computes them, the device
// manager's devices per container, the pods.
func (r *referee) status() *simStatus {
	r.mu.RLock()
	m := r.m
	restarts := r.restarts
	r.mu.RUnlock()
	node, err := r.cachedNode(r.ctx)
	counts, deleted := r.capacity(m)
	st := &simStatus{Result: "status", KubeletVersion: r.release, Engine: "referee " + r.module,
		Dir: devicePluginsDir, KubeletSocket: pluginapi.KubeletSocket,
		ControlSocket: strp(r.cfg.controlSocket), Running: true, Restarts: restarts,
		Resources: []resourceStatus{}, Pods: []podStatus{}, RestoredPods: []restoredPodStatus{}}
	if m.podres != nil {
		st.PodresourcesSocket = strp(r.cfg.podresourcesSocket)
	}
	inUse := map[string]sets.Set[string]{}
	r.mu.RLock()
	pods := append([]*admittedPod(nil), r.pods...)
	r.mu.RUnlock()
	// A pod the referee deleted stays in the device manager's records (and
	// checkpoint) until UpdateAllocatedDevices drops inactive pods, which
	// every Allocate does first: its devices are free for the next pod, so
	// they are neither in use nor a previous kubelet's restored pod.
	r.mu.RLock()
	known := r.deleted.Clone()
	r.mu.RUnlock()
	for _, p := range pods {
		known.Insert(string(p.pod.UID))
		ps := podStatus{Name: p.spec.Name, Namespace: p.spec.Namespace, UID: string(p.pod.UID), Containers: []containerDevicesView{}}
		for _, c := range p.spec.Containers {
			devs := r.devicesOf(m, p.pod.UID, c.Name)
			for res, ids := range devs {
				if inUse[res] == nil {
					inUse[res] = sets.New[string]()
				}
				inUse[res].Insert(ids...)
			}
			ps.Containers = append(ps.Containers, containerDevicesView{Name: c.Name, Kind: c.Kind, Devices: devs})
		}
		st.Pods = append(st.Pods, ps)
	}
	// Checkpoint entries of pods the referee does not know (a previous
	// kubelet's): the device manager restored them and counts them in use
	// until it drops inactive pods.
	if entries, err := readCheckpoint(filepath.Join(devicePluginsDir, checkpointName)); err == nil {
		for _, e := range entries {
			if known.Has(e.PodUID) {
				continue
			}
			var rp *restoredPodStatus
			for i := range st.RestoredPods {
				if st.RestoredPods[i].UID == e.PodUID {
					rp = &st.RestoredPods[i]
				}
			}
			if rp == nil {
				st.RestoredPods = append(st.RestoredPods, restoredPodStatus{UID: e.PodUID, Containers: []restoredContainer{}})
				rp = &st.RestoredPods[len(st.RestoredPods)-1]
			}
			var rc *restoredContainer
			for i := range rp.Containers {
				if rp.Containers[i].Name == e.ContainerName {
					rc = &rp.Containers[i]
				}
			}
			if rc == nil {
				rp.Containers = append(rp.Containers, restoredContainer{Name: e.ContainerName, Devices: map[string][]string{}})
				rc = &rp.Containers[len(rp.Containers)-1]
			}
			ids := sets.List(e.DeviceIDs.Devices())
			rc.Devices[e.ResourceName] = append(rc.Devices[e.ResourceName], ids...)
			if inUse[e.ResourceName] == nil {
				inUse[e.ResourceName] = sets.New[string]()
			}
			inUse[e.ResourceName].Insert(ids...)
		}
	}
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	sort.Strings(names)
	devices := allDevices(m.dm)
	for _, n := range names {
		rs := resourceStatus{Resource: n, Devices: []device{}, InUse: inUse[n].Len()}
		if d, ok := devices[n]; ok {
			sort.Slice(d, func(i, j int) bool { return d[i].ID < d[j].ID })
			rs.Devices = d
		}
		r.plugin(&rs)
		if deleted.Has(n) {
			rs.State = "removed"
		}
		if err == nil {
			if q, ok := node.Status.Capacity[v1.ResourceName(n)]; ok {
				rs.Reported = true
				rs.Capacity = q.Value()
			}
			if q, ok := node.Status.Allocatable[v1.ResourceName(n)]; ok {
				rs.Allocatable = q.Value()
			}
		}
		st.Resources = append(st.Resources, rs)
	}
	return st
}

// handle answers one control request.
func (r *referee) handle(req request) any {
	r.turn.Lock()
	defer r.turn.Unlock()
	switch req.Op {
	case "admit":
		if req.Pod == nil {
			return errReply(exitUsage, "bad control request: missing field `pod`")
		}
		out, e := r.admit(*req.Pod)
		if e != nil {
			return errReply(e.code, e.msg)
		}
		return okReply(out)
	case "delete":
		out, e := r.del(req.Namespace, req.Name)
		if e != nil {
			return errReply(e.code, e.msg)
		}
		return okReply(out)
	case "restart":
		var wait uint64
		if req.WaitMs != nil {
			wait = *req.WaitMs
		}
		if wait > 365*24*3600*1000 {
			return errReply(exitUsage, fmt.Sprintf("bad control request: wait_ms: %d ms is more than 365 days", wait))
		}
		var readmit *time.Duration
		if req.ReadmitAfter != nil {
			if *req.ReadmitAfter > 365*24*3600*1000 {
				return errReply(exitUsage, fmt.Sprintf("bad control request: readmit_after_ms: %d ms is more than 365 days", *req.ReadmitAfter))
			}
			d := time.Duration(*req.ReadmitAfter) * time.Millisecond
			readmit = &d
		}
		return okReply(r.restart(time.Duration(wait)*time.Millisecond, readmit))
	case "reboot":
		var after uint64
		if req.ReadmitAfter != nil {
			after = *req.ReadmitAfter
		}
		if after > 3600*1000 {
			return errReply(exitUsage, fmt.Sprintf("bad control request: readmit_after_ms: %d ms is more than an hour", after))
		}
		out, e := r.reboot(req.Order, time.Duration(after)*time.Millisecond)
		if e != nil {
			return errReply(e.code, e.msg)
		}
		return okReply(out)
	case "restart_container":
		out, e := r.restartContainer(req.Namespace, req.Name, req.Container)
		if e != nil {
			return errReply(e.code, e.msg)
		}
		return okReply(out)
	case "status":
		return okReply(r.status())
	case "events":
		var since uint64
		if req.Since != nil {
			since = *req.Since
		}
		return okReply(r.events.since(since))
	case "dry_run":
		return errReply(exitUsage, "dry_run: the referee runs the kubelet's own admission, which has no dry run: "+
			"the Topology Manager and the device manager allocate (and call the plugin) as they judge")
	case "set_grace":
		return errReply(exitUsage, "set_grace: the referee runs the kubelet's device manager, whose grace period after "+
			"a plugin's stream ends is a constant (endpointStopGracePeriod, 5 minutes) in pkg/kubelet/cm/devicemanager/manager.go")
	default:
		return errReply(exitUsage, fmt.Sprintf("bad control request: unknown op %q", req.Op))
	}
}

// plugin fills in what the kubelet's log said of the resource's plugin:
// its latest registration (socket, endpoint, options), how many
// registrations and ListAndWatch messages, and whether its stream ended
// since it last registered.
func (r *referee) plugin(rs *resourceStatus) {
	r.events.mu.Lock()
	defer r.events.mu.Unlock()
	rs.State = "registered"
	for _, e := range r.events.events {
		if e.Resource != rs.Resource {
			continue
		}
		switch e.Event {
		case "registered":
			rs.Registrations++
			rs.Socket, rs.Endpoint, rs.Via = strp(e.Socket), strp(e.Endpoint), strp(e.Via)
			rs.PreStartRequired = e.PreStartRequired
			rs.GetPreferredAllocationAvailable = e.GetPreferredAllocationAvailable
			rs.State = "registered"
		case "snapshot":
			rs.Snapshots++
			if rs.State == "registered" {
				rs.State = "serving"
			}
		case "stream_ended":
			rs.State = "stream-ended"
		}
	}
}
