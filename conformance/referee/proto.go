package main

// The control protocol's JSON, field for field as dpctl's Rust types
// (src/lib/kubelet_sim/control.rs, outcome.rs, state.rs, events.rs, mod.rs,
// pod.rs) serialize them: a reply must deserialize into the Rust `Reply`.
// A field the kubelet's code has no equivalent for keeps its zero value.

import "encoding/json"

type jsonRaw = json.RawMessage

// request is one line on the control socket (`Request`, tagged by "op").
type request struct {
	Op            string   `json:"op"`
	Pod           *podSpec `json:"pod,omitempty"`
	Namespace     string   `json:"namespace,omitempty"`
	Name          string   `json:"name,omitempty"`
	Container     string   `json:"container,omitempty"`
	WaitMs        *uint64  `json:"wait_ms,omitempty"`
	GracePeriodMs *uint64  `json:"grace_period_ms,omitempty"`
	Since         *uint64  `json:"since,omitempty"`
	Order         []string `json:"order,omitempty"`
	ReadmitAfter  *uint64  `json:"readmit_after_ms,omitempty"`
}

type compute struct {
	CPURequestMillis *uint64 `json:"cpu_request_millis,omitempty"`
	CPULimitMillis   *uint64 `json:"cpu_limit_millis,omitempty"`
	MemoryRequest    *uint64 `json:"memory_request,omitempty"`
	MemoryLimit      *uint64 `json:"memory_limit,omitempty"`
}

type containerSpec struct {
	Name    string            `json:"name"`
	Kind    string            `json:"kind"` // init, sidecar, regular
	Limits  map[string]uint64 `json:"limits"`
	Compute compute           `json:"compute"`
	Claims  []containerClaim  `json:"claims,omitempty"`
}

type podSpec struct {
	Name           string          `json:"name"`
	Namespace      string          `json:"namespace"`
	UID            *string         `json:"uid"`
	Containers     []containerSpec `json:"containers"`
	ResourceClaims []podClaimRef   `json:"resource_claims,omitempty"`
	ClaimObjects   []claimObject   `json:"claim_objects,omitempty"`
}

type remoteError struct {
	Message  string  `json:"message"`
	Hint     *string `json:"hint"`
	ExitCode uint8   `json:"exit_code"`
}

// The exit codes of dpctl's `error::exit` module that the referee uses.
const (
	exitFailure = 1
	exitUsage   = 2
)

type containerAllocation struct {
	DevicesIDs  []string          `json:"devices_ids"`
	Envs        map[string]string `json:"envs"`
	Mounts      []mount           `json:"mounts"`
	Devices     []deviceSpec      `json:"devices"`
	Annotations map[string]string `json:"annotations"`
	CDIDevices  []string          `json:"cdi_devices"`
}

type mount struct {
	ContainerPath string `json:"container_path"`
	HostPath      string `json:"host_path"`
	ReadOnly      bool   `json:"read_only"`
}

type deviceSpec struct {
	ContainerPath string `json:"container_path"`
	HostPath      string `json:"host_path"`
	Permissions   string `json:"permissions"`
}

type resourceOutcome struct {
	Resource   string               `json:"resource"`
	Requested  uint64               `json:"requested"`
	Reused     []string             `json:"reused"`
	Preferred  json.RawMessage      `json:"preferred"`
	Devices    []string             `json:"devices"`
	Allocation *containerAllocation `json:"allocation"`
	Warnings   []json.RawMessage    `json:"warnings"`
	PreStart   *string              `json:"pre_start"`
}

type containerOutcome struct {
	Name       string            `json:"name"`
	Kind       string            `json:"kind"`
	Resources  []resourceOutcome `json:"resources"`
	Started    bool              `json:"started"`
	StartError *string           `json:"start_error"`
	Running    *bool             `json:"running,omitempty"`
}

type admitOutcome struct {
	Result     string             `json:"result"`
	Pod        string             `json:"pod"`
	Namespace  string             `json:"namespace"`
	UID        string             `json:"uid"`
	Admitted   bool               `json:"admitted"`
	Reason     *string            `json:"reason"`
	Message    *string            `json:"message"`
	Containers []containerOutcome `json:"containers"`
	TookMs     uint64             `json:"took_ms"`
	Dra        *draOutcome        `json:"dra,omitempty"`
}

type deleteOutcome struct {
	Result    string              `json:"result"`
	Pod       string              `json:"pod"`
	Namespace string              `json:"namespace"`
	Freed     map[string][]string `json:"freed"`
	Dra       *draOutcome         `json:"dra,omitempty"`
}

type resourceReturn struct {
	Resource             string  `json:"resource"`
	Reregistered         bool    `json:"reregistered"`
	RegisterAfterMs      *uint64 `json:"register_after_ms"`
	FirstSnapshotAfterMs *uint64 `json:"first_snapshot_after_ms"`
	Capacity             int64   `json:"capacity"`
	Allocatable          int64   `json:"allocatable"`
}

type restartReport struct {
	Result         string           `json:"result"`
	KubeletVersion string           `json:"kubelet_version"`
	DeletedSockets []string         `json:"deleted_sockets"`
	DeletedFiles   []string         `json:"deleted_files"`
	WouldDelete    []string         `json:"would_delete"`
	RestoredPods   int              `json:"restored_pods"`
	Checkpoint     *string          `json:"checkpoint"`
	WaitedMs       uint64           `json:"waited_ms"`
	AllReturned    bool             `json:"all_returned"`
	Resources      []resourceReturn `json:"resources"`
	Readmitted     []admitOutcome   `json:"readmitted,omitempty"`
}

type restartOutcome struct {
	Result     string            `json:"result"`
	Pod        string            `json:"pod"`
	Namespace  string            `json:"namespace"`
	Container  string            `json:"container"`
	PreStart   map[string]string `json:"pre_start"`
	Started    bool              `json:"started"`
	StartError *string           `json:"start_error"`
}

type device struct {
	ID        string  `json:"id"`
	Health    string  `json:"health"`
	NumaNodes []int64 `json:"numa_nodes"`
}

type resourceStatus struct {
	Resource                        string   `json:"resource"`
	State                           string   `json:"state"`
	Reported                        bool     `json:"reported"`
	Capacity                        int64    `json:"capacity"`
	Allocatable                     int64    `json:"allocatable"`
	InUse                           int      `json:"in_use"`
	Socket                          *string  `json:"socket"`
	Endpoint                        *string  `json:"endpoint"`
	Via                             *string  `json:"via"`
	PreStartRequired                bool     `json:"pre_start_required"`
	GetPreferredAllocationAvailable bool     `json:"get_preferred_allocation_available"`
	Snapshots                       uint64   `json:"snapshots"`
	Registrations                   uint64   `json:"registrations"`
	RemovalInMs                     *uint64  `json:"removal_in_ms"`
	Devices                         []device `json:"devices"`
}

type containerDevicesView struct {
	Name    string              `json:"name"`
	Kind    string              `json:"kind"`
	Devices map[string][]string `json:"devices"`
}

type podStatus struct {
	Name       string                 `json:"name"`
	Namespace  string                 `json:"namespace"`
	UID        string                 `json:"uid"`
	Containers []containerDevicesView `json:"containers"`
}

type restoredContainer struct {
	Name    string              `json:"name"`
	Devices map[string][]string `json:"devices"`
}

type restoredPodStatus struct {
	UID        string              `json:"uid"`
	Containers []restoredContainer `json:"containers"`
}

type simStatus struct {
	Result             string              `json:"result"`
	KubeletVersion     string              `json:"kubelet_version"`
	Engine             string              `json:"engine"`
	Dir                string              `json:"dir"`
	KubeletSocket      string              `json:"kubelet_socket"`
	PodresourcesSocket *string             `json:"podresources_socket"`
	ControlSocket      *string             `json:"control_socket"`
	Running            bool                `json:"running"`
	GracePeriodMs      uint64              `json:"grace_period_ms"`
	Restarts           uint32              `json:"restarts"`
	Resources          []resourceStatus    `json:"resources"`
	Pods               []podStatus         `json:"pods"`
	RestoredPods       []restoredPodStatus `json:"restored_pods"`
	Checkpoint         json.RawMessage     `json:"checkpoint"`
}

// okReply wraps an answer (which carries its own "result" tag).
func okReply(answer any) any { return map[string]any{"ok": answer} }

func errReply(code uint8, format string) any {
	return map[string]any{"error": remoteError{Message: format, ExitCode: code}}
}
