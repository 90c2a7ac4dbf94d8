package main

// The referee: one kubelet's device manager, Topology Manager, CPU and
// memory managers, plugin manager and PodResources server, built and
// wired as pkg/kubelet/cm/container_manager_linux.go and
// pkg/kubelet/kubelet.go wire them, driven by the control protocol.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	pluginregistration "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/dra"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/pluginmanager"
	schedulerframework "k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/cpuset"
)

// The kubelet's directories the device manager and plugin manager use
// (their paths are fixed in the kubelet's code or defaults).
const (
	devicePluginsDir = "/var/lib/kubelet/device-plugins"
	checkpointName   = "kubelet_internal_checkpoint"
)

type refConfig struct {
	controlSocket      string
	podresourcesSocket string
	registryDir        string
	draStateDir        string
	tmPolicy           string
	tmScope            string
	tmOptions          map[string]string
	cpuPolicy          string
	reservedCPUs       cpuset.CPUSet
	numaNodes          int
	cpusPerNuma        int
	distances          [][]uint64
}

// configError: a manager refused the configuration (the flags), as the
// kubelet refuses to start with it.
type configError struct{ error }

// managers is one kubelet start's worth of managers (a restart builds new ones).
type managers struct {
	tm        topologymanager.Manager
	dm        *devicemanager.ManagerImpl
	cpu       cpumanager.Manager
	mem       memorymanager.Manager
	pm        pluginmanager.PluginManager
	pmStop    chan struct{}
	admitters []lifecycle.PodAdmitHandler
	podres    *grpc.Server
	dra       *dra.Manager
	draStop   context.CancelFunc
	// gen is what this start's managers see of the pods; stop ends it.
	gen *generation
	// ctx ends when this start's managers stop (the plugin manager's
	// reconciler runs on it from 1.37).
	ctx    context.Context
	cancel context.CancelFunc
}

// generation is one kubelet start's pod sources, as its managers see them.
// A kubelet restart is a new process: the old CPU manager's reconcile loop
// (started with wait.NeverStop in cpumanager.(*manager).Start,
// pkg/kubelet/cm/cpumanager/cpu_manager.go) dies with it. The referee
// restarts in process and that loop has no stop, so once its start is
// stopped the loop sees no active pod and sources that are never ready:
// removeStaleState returns at once and reconcileState has nothing to
// update, so it writes nothing (the new CPU manager owns cpu_manager_state).
type generation struct {
	r       *referee
	stopped atomic.Bool
}

func (g *generation) activePods() []*v1.Pod {
	if g.stopped.Load() {
		return nil
	}
	return g.r.activePods()
}

func (g *generation) AddSource(string) {}
func (g *generation) AllReady() bool   { return !g.stopped.Load() && g.r.sources.AllReady() }

// A pod the referee admitted: active until deleted.
type admittedPod struct {
	spec podSpec
	pod  *v1.Pod
	// Container ID per started container (what the runtime would report).
	ids map[string]string
	// Containers currently running (a plain init container ran to completion).
	running map[string]bool
}

type referee struct {
	cfg      refConfig
	module   string // "v1.37.2"
	release  string // "1.37"
	machine  *machineInfo
	stateDir string
	ctx      context.Context
	logger   klog.Logger

	// turn serializes the control operations (the kubelet admits one pod at a time).
	turn sync.Mutex

	mu      sync.RWMutex
	pods    []*admittedPod
	pending *v1.Pod // the pod under admission: active, as in the kubelet's pod manager
	// While a restart re-admits its pods: the UIDs re-admitted so far (the
	// new kubelet's pod manager holds only the pods its sources handed it
	// so far; HandlePodAdditions in pkg/kubelet/kubelet.go adds them one at
	// a time). nil otherwise.
	readmitted sets.Set[string]
	// Pods the admit handlers rejected: the kubelet's pod manager keeps
	// them (phase Failed, inactive) until the API server deletes them, by
	// namespace/name (the newest pod of that name).
	rejected map[string]*v1.Pod
	node     *v1.Node
	m        *managers
	restarts uint32
	nextID   uint64

	// What the kubelet did with its plugins, from its own log lines.
	events *eventLog
	// UIDs of the pods deleted (see status).
	deleted sets.Set[string]
	// The pod sources as the device, CPU and memory managers see them.
	sources sourcesGate
	// The API server the DRA manager reads ResourceClaims from.
	api *apiServer
}

// deviceManager is the running kubelet's device manager (nil before the first start).
func (r *referee) deviceManager() *devicemanager.ManagerImpl {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.m == nil {
		return nil
	}
	return r.m.dm
}

// activePods is the kubelet's GetActivePods: admitted pods plus the one
// being admitted (the kubelet adds a pod to its pod manager before running
// the admit handlers, so the device manager sees it as active).
func (r *referee) activePods() []*v1.Pod {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*v1.Pod, 0, len(r.pods)+1)
	for _, p := range r.pods {
		if r.readmitted != nil && !r.readmitted.Has(string(p.pod.UID)) {
			continue
		}
		out = append(out, p.pod)
	}
	if r.pending != nil {
		out = append(out, r.pending)
	}
	return out
}

func (r *referee) otherPods(except *v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range r.activePods() {
		if p.UID != except.UID {
			out = append(out, p)
		}
	}
	return out
}

func (r *referee) findPod(namespace, name string) (int, *admittedPod) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for i, p := range r.pods {
		if p.spec.Namespace == namespace && p.spec.Name == name {
			return i, p
		}
	}
	return -1, nil
}

// sourcesReady: the referee's pod list is the only pod source and it is complete.
type sourcesReady struct{}

func (sourcesReady) AddSource(string) {}
func (sourcesReady) AllReady() bool   { return true }

// start builds and starts one kubelet's managers, in container_manager_linux.go's
// order (Topology Manager, device manager, CPU manager, memory manager; then
// Start: CPU, memory, device manager), then the plugin manager and PodResources.
func (r *referee) start(cmap containermap.ContainerMap, running sets.Set[string]) (*managers, error) {
	m := &managers{gen: &generation{r: r}}
	m.ctx, m.cancel = context.WithCancel(r.ctx)
	var err error
	topo := r.machine.Topology
	if m.tm, err = newTopologyManager(r.logger, topo, r.cfg.tmPolicy, r.cfg.tmScope, r.cfg.tmOptions); err != nil {
		return nil, configError{fmt.Errorf("topology manager: %w", err)}
	}
	if m.dm, err = newDeviceManager(r.logger, topo, m.tm); err != nil {
		return nil, fmt.Errorf("device manager: %w", err)
	}
	addHintProvider(r.logger, m.tm, m.dm)
	reservation := r.allocatableReservation()
	if m.cpu, err = newCPUManager(r.logger, r.cfg.cpuPolicy, r.machine, r.cfg.reservedCPUs, reservation, r.stateDir, m.tm); err != nil {
		return nil, configError{fmt.Errorf("cpu manager: %w", err)}
	}
	addHintProvider(r.logger, m.tm, m.cpu)
	if m.mem, err = newMemoryManager(r.ctx, r.logger, r.machine, reservation, r.stateDir, m.tm); err != nil {
		return nil, configError{fmt.Errorf("memory manager: %w", err)}
	}
	addHintProvider(r.logger, m.tm, m.mem)

	if err := startCPUManager(m.ctx, m.cpu, m.gen.activePods, m.gen, r, runtimeStub{}, cmap.Clone()); err != nil {
		return nil, fmt.Errorf("start cpu manager error: %w", err)
	}
	if err := m.mem.Start(m.ctx, m.gen.activePods, m.gen, r, runtimeStub{}, cmap.Clone()); err != nil {
		return nil, fmt.Errorf("start memory manager error: %w", err)
	}
	if err := startDeviceManager(r.logger, m.dm, m.gen.activePods, m.gen, cmap.Clone(), running); err != nil {
		return nil, fmt.Errorf("start device manager: %w", err)
	}

	// The admit handlers of pkg/kubelet/kubelet.go that judge what the
	// referee plays, in the kubelet's order: the container manager's
	// allocate-resources handler (the Topology Manager), then the predicate
	// handler (node resources, with the device manager's
	// UpdatePluginResources). The handlers between and around them
	// (eviction, sysctls, AppArmor, pod features, shutdown) admit the
	// referee's pods unconditionally.
	m.admitters = []lifecycle.PodAdmitHandler{m.tm, newPredicateHandler(r.cachedNode, m.dm.UpdatePluginResources)}

	// The DRA manager after the others, as container_manager_linux.go
	// starts it; its plugin handler is the plugin manager's for DRAPlugin
	// (kubelet.go adds it beside the device manager's).
	if err := r.startDRA(m); err != nil {
		return nil, err
	}
	m.pm = pluginmanager.NewPluginManager(r.cfg.registryDir, nil)
	m.pm.AddHandler(pluginregistration.DevicePlugin, m.dm.GetWatcherHandler())
	m.pm.AddHandler(pluginregistration.DRAPlugin, m.dra.GetWatcherHandler())
	m.pmStop = make(chan struct{})
	// Its reconciler runs on m.ctx (1.37+: reconciler.Run(ctx) in
	// pkg/kubelet/pluginmanager/plugin_manager.go), so it ends with this
	// start as it ends with a kubelet process.
	go runPluginManager(m.ctx, m.pm, sourcesReady{}, m.pmStop)

	if podResourcesServed() {
		srv, err := r.servePodResources(m)
		if err != nil {
			return nil, err
		}
		m.podres = srv
	}
	return m, nil
}

// stop ends one kubelet's managers as a kubelet exit would: the plugin
// manager and the registration server (its plugin connections) stop, the
// PodResources socket goes away. The CPU and memory managers have no stop.
func (r *referee) stop(m *managers) {
	m.gen.stopped.Store(true)
	close(m.pmStop)
	defer m.cancel()
	r.stopDRA(m)
	if err := stopDeviceManager(r.logger, m.dm); err != nil {
		r.logger.Error(err, "stopping the device manager")
	}
	if m.podres != nil {
		m.podres.Stop()
		_ = os.Remove(r.cfg.podresourcesSocket)
	}
}

// allocatableReservation is the container manager's
// GetNodeAllocatableReservation (pkg/kubelet/cm/node_container_manager_linux.go):
// --reserved-cpus reserves that many CPUs (the kubelet's system-reserved cpu
// when ReservedSystemCPUs is set), and hardEvictionReservation
// (pkg/kubelet/cm/helpers.go) adds the default hard eviction threshold,
// memory.available<100Mi (DefaultEvictionHard, pkg/kubelet/eviction/defaults_linux.go),
// to memory. The machine has no ephemeral-storage capacity, so nodefs.available
// reserves nothing.
func (r *referee) allocatableReservation() v1.ResourceList {
	out := v1.ResourceList{v1.ResourceMemory: hardEvictionMemory}
	if n := r.cfg.reservedCPUs.Size(); n > 0 {
		out[v1.ResourceCPU] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	return out
}

// hardEvictionMemory is the kubelet's default memory.available hard eviction threshold.
var hardEvictionMemory = resource.MustParse("100Mi")

// cachedNode is the kubelet's node as its status setter last made it:
// the referee runs the kubelet's MachineInfo setter before every read, so
// the node status is always current (a kubelet syncs it every 10s).
func (r *referee) cachedNode(ctx context.Context) (*v1.Node, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.nodeSetter(r.m)(ctx, r.node); err != nil {
		return nil, err
	}
	return r.node.DeepCopy(), nil
}

func (r *referee) newContainerID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nextID++
	return fmt.Sprintf("%064x", r.nextID)
}

// GetPodStatus (status.PodStatusProvider for the CPU and memory managers'
// reconcile loops): the referee's started containers are running.
func (r *referee) GetPodStatus(uid typesUID) (v1.PodStatus, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, p := range r.pods {
		if p.pod.UID != uid {
			continue
		}
		st := v1.PodStatus{Phase: v1.PodRunning}
		for _, c := range p.spec.Containers {
			id, ok := p.ids[c.Name]
			if !ok {
				continue
			}
			cs := v1.ContainerStatus{Name: c.Name, ContainerID: "referee://" + id}
			if p.running[c.Name] {
				cs.State.Running = &v1.ContainerStateRunning{}
			} else {
				cs.State.Terminated = &v1.ContainerStateTerminated{}
			}
			if c.Kind == "regular" {
				st.ContainerStatuses = append(st.ContainerStatuses, cs)
			} else {
				st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
			}
		}
		return st, true
	}
	return v1.PodStatus{}, false
}

// runtimeStub stands for the container runtime the CPU and memory managers
// update cgroups through: there are no containers to update.
type runtimeStub struct{}

func (runtimeStub) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

type schedulerNodeInfo = schedulerframework.NodeInfo

// entry is one non-directory in the device-plugins directory.
type entry struct {
	socket bool   // through links, as the kubelet's cleanup (os.Stat) sees it
	inode  uint64 // the entry itself: a new inode under the same name is a new file
}

// dirEntries lists the device-plugins directory. Comparing inodes tells a
// socket the cleanup deleted from one a plugin re-created at once.
func dirEntries(dir string) map[string]entry {
	out := map[string]entry{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return out
	}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		var en entry
		if st, err := os.Stat(path); err == nil {
			en.socket = st.Mode()&os.ModeSocket != 0
		}
		if st, err := os.Lstat(path); err == nil {
			if sys, ok := st.Sys().(*syscall.Stat_t); ok {
				en.inode = sys.Ino
			}
		}
		out[e.Name()] = en
	}
	return out
}

// capacity is the device manager's GetCapacity as counts.
type counts struct{ capacity, allocatable int64 }

func (r *referee) capacity(m *managers) (map[string]counts, sets.Set[string]) {
	capacity, allocatable, deleted := deviceCapacity(r.logger, m.dm)
	out := map[string]counts{}
	for name, q := range capacity {
		c := out[string(name)]
		c.capacity = q.Value()
		out[string(name)] = c
	}
	for name, q := range allocatable {
		c := out[string(name)]
		c.allocatable = q.Value()
		out[string(name)] = c
	}
	return out, sets.New(deleted...)
}

// restart stops this kubelet's managers and starts new ones as a kubelet
// start does: admitted pods stay active and their running containers are
// handed to the device manager's Start; `readmit` after the start (at once
// when nil: every kubelet start gets its pods from its sources again and
// admits each, HandlePodAdditions in pkg/kubelet/kubelet.go) every pod is
// admitted again before the sources are ready (readmit.go); then it waits
// up to `wait` for the resources known before to have devices again, and
// for the DRA drivers the admitted pods' claims name to be registered.
func (r *referee) restart(wait time.Duration, readmit *time.Duration) restartReport {
	r.mu.RLock()
	old := r.m
	r.mu.RUnlock()
	before, _ := r.capacity(old)
	r.stop(old)
	entries := dirEntries(devicePluginsDir)

	cmap := containermap.NewContainerMap()
	running := sets.New[string]()
	r.mu.RLock()
	for _, p := range r.pods {
		for name, id := range p.ids {
			cmap.Add(string(p.pod.UID), name, id)
			if p.running[name] {
				running.Insert(id)
			}
		}
	}
	r.mu.RUnlock()

	startedAt := time.Now()
	r.sources.notReady.Store(true)
	m, err := r.start(cmap, running)
	if err != nil {
		// A kubelet that cannot start exits; so does the referee.
		r.logger.Error(err, "restart failed")
		os.Exit(1)
	}
	r.mu.Lock()
	r.m = m
	r.restarts++
	r.mu.Unlock()

	after := time.Duration(0)
	if readmit != nil {
		after = *readmit
	}
	time.Sleep(time.Until(startedAt.Add(after)))
	readmitted := r.readmitAll(m)
	r.sources.notReady.Store(false)
	rep := restartReport{Result: "restart", KubeletVersion: r.release,
		DeletedSockets: []string{}, DeletedFiles: []string{}, WouldDelete: []string{}, Resources: []resourceReturn{}}
	rep.DeletedSockets, rep.DeletedFiles = deletedEntries(entries, dirEntries(devicePluginsDir))
	deadline := startedAt.Add(wait)
	back := r.awaitReturn(m, before, startedAt, deadline)
	rep.WaitedMs = uint64(time.Since(startedAt).Milliseconds())
	now, _ := r.capacity(m)
	names := sortedKeys(before)
	rep.AllReturned = len(back) == len(names)
	for _, n := range names {
		rr := resourceReturn{Resource: n, Capacity: now[n].capacity, Allocatable: now[n].allocatable}
		if ms, ok := back[n]; ok {
			rr.Reregistered = true
			rr.FirstSnapshotAfterMs = &ms
		}
		if e, ok := r.events.last(n, "registered"); ok && e.UnixMs >= uint64(startedAt.UnixMilli()) {
			after := e.UnixMs - uint64(startedAt.UnixMilli())
			rr.RegisterAfterMs = &after
		}
		rep.Resources = append(rep.Resources, rr)
	}
	rep.RestoredPods = r.checkpointPods()
	// The DRA drivers count as the resources do: every driver an admitted
	// pod's claims name must be registered again.
	if !r.awaitDrivers(m, deadline) {
		rep.AllReturned = false
	}
	rep.Readmitted = readmitted
	return rep
}

// deletedEntries: what the device manager's cleanup at start removed (an
// entry gone, or a new inode under the same name).
func deletedEntries(before, after map[string]entry) (sockets, files []string) {
	sockets, files = []string{}, []string{}
	for name, was := range before {
		if now, still := after[name]; still && now.inode == was.inode {
			continue
		}
		if was.socket {
			sockets = append(sockets, name)
		} else {
			files = append(files, name)
		}
	}
	sort.Strings(sockets)
	sort.Strings(files)
	return sockets, files
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// awaitReturn: who came back, a resource known before having capacity
// again (its plugin registered and sent devices), seen through GetCapacity
// every 10ms until all are back or `deadline`; ms after `startedAt`.
func (r *referee) awaitReturn(m *managers, before map[string]counts, startedAt, deadline time.Time) map[string]uint64 {
	names := sortedKeys(before)
	back := map[string]uint64{}
	for {
		now, _ := r.capacity(m)
		for _, n := range names {
			if _, seen := back[n]; !seen && now[n].capacity > 0 {
				back[n] = uint64(time.Since(startedAt).Milliseconds())
			}
		}
		if len(back) == len(names) || time.Now().After(deadline) {
			return back
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkpointPods counts the pods the device manager's checkpoint holds.
func (r *referee) checkpointPods() int {
	entries, err := readCheckpoint(filepath.Join(devicePluginsDir, checkpointName))
	if err != nil {
		return 0
	}
	uids := sets.New[string]()
	for _, e := range entries {
		uids.Insert(e.PodUID)
	}
	return uids.Len()
}
