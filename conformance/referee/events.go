package main

// The control protocol's `events`: what the kubelet did with its plugins
// (registrations, refusals, ListAndWatch messages, stream ends), read off
// the kubelet's own log lines. The referee installs itself as klog's logger
// and turns the device manager's structured messages (the same text in
// every release since 1.34, pkg/kubelet/cm/devicemanager/plugin/v1beta1)
// into events; what a line lacks (the plugin socket before 1.37, the
// options GetDevicePluginOptions answered) it reads from the device
// manager's own state at that moment.

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/go-logr/logr"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
)

// wireEvent is one event as dpctl's `control::WireEvent` serializes it.
type wireEvent struct {
	UnixMs                          uint64 `json:"unix_ms"`
	Event                           string `json:"event"`
	Resource                        string `json:"resource"`
	Endpoint                        string `json:"endpoint,omitempty"`
	Socket                          string `json:"socket,omitempty"`
	Via                             string `json:"via,omitempty"`
	Version                         string `json:"version,omitempty"`
	PreStartRequired                bool   `json:"pre_start_required,omitempty"`
	GetPreferredAllocationAvailable bool   `json:"get_preferred_allocation_available,omitempty"`
	TookMs                          uint64 `json:"took_ms,omitempty"`
	Message                         string `json:"message,omitempty"`
	Devices                         int    `json:"devices,omitempty"`
	Reason                          string `json:"reason,omitempty"`
}

type eventsAnswer struct {
	Result string      `json:"result"`
	Events []wireEvent `json:"events"`
	Next   uint64      `json:"next"`
}

// eventLog keeps every event, in order, and what a registration under way looked like.
type eventLog struct {
	mu     sync.Mutex
	events []wireEvent
	// Per resource: when its Register (or plugin watcher registration)
	// began, how, and the endpoint the watcher named.
	began map[string]pending
	// The device manager of the kubelet now running (nil while none is).
	dm func() *devicemanager.ManagerImpl
}

type pending struct {
	at       time.Time
	via      string
	endpoint string
}

const maxEvents = 100000

func (l *eventLog) add(e wireEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.events) < maxEvents {
		l.events = append(l.events, e)
	}
}

// since is the `events` answer: the events from index `from` on.
func (l *eventLog) since(from uint64) eventsAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := uint64(len(l.events))
	if from > n {
		from = n
	}
	out := append([]wireEvent{}, l.events[from:]...)
	return eventsAnswer{Result: "events", Events: out, Next: n}
}

// last is the newest event of `resource` among `kinds`, if any.
func (l *eventLog) last(resource string, kinds ...string) (wireEvent, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events) - 1; i >= 0; i-- {
		e := l.events[i]
		if e.Resource != resource {
			continue
		}
		for _, k := range kinds {
			if e.Event == k {
				return e, true
			}
		}
	}
	return wireEvent{}, false
}

func ms(t time.Time) uint64 { return uint64(t.UnixMilli()) }

func kv(keysAndValues []any, key string) string {
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		if k, ok := keysAndValues[i].(string); ok && k == key {
			return fmt.Sprint(keysAndValues[i+1])
		}
	}
	return ""
}

// observe turns one log line of the device manager into an event.
func (l *eventLog) observe(err error, msg string, keysAndValues []any) {
	now := time.Now()
	switch msg {
	case "Got registration request from device plugin with resource":
		l.mu.Lock()
		l.began[kv(keysAndValues, "resourceName")] = pending{at: now, via: "kubelet.sock"}
		l.mu.Unlock()
	case "Registering plugin at endpoint":
		l.mu.Lock()
		l.began[kv(keysAndValues, "plugin")] = pending{at: now, via: "plugins_registry", endpoint: kv(keysAndValues, "endpoint")}
		l.mu.Unlock()
	case "Connected to new client":
		l.registered(now, kv(keysAndValues, "resource"), kv(keysAndValues, "socketPath"))
	case "Bad registration request from device plugin with resource", "Bad registration request from device plugin",
		"Failed to connect to new client":
		res := kv(keysAndValues, "resourceName")
		if res == "" {
			res = kv(keysAndValues, "resource")
		}
		l.mu.Lock()
		p := l.began[res]
		if res == "" {
			// The invalid-name refusal logs no name: it is the latest Register's.
			for name, q := range l.began {
				if q.at.After(p.at) {
					res, p = name, q
				}
			}
		}
		l.mu.Unlock()
		if msg == "Failed to connect to new client" && p.via == "kubelet.sock" {
			return // Register logs the same error again as "Error connecting ...", below
		}
		l.add(wireEvent{UnixMs: ms(now), Event: "registration_rejected", Resource: res, Via: via(p),
			Socket: kv(keysAndValues, "socketPath"), Endpoint: p.endpoint, Message: errText(err)})
	case "Error connecting to device plugin client":
		l.mu.Lock()
		var res string
		var p pending
		for name, q := range l.began {
			if q.at.After(p.at) {
				res, p = name, q
			}
		}
		l.mu.Unlock()
		l.add(wireEvent{UnixMs: ms(now), Event: "registration_rejected", Resource: res, Via: via(p), Message: errText(err)})
	case "State pushed for device plugin":
		var n int
		_, _ = fmt.Sscan(kv(keysAndValues, "resourceCapacity"), &n)
		l.add(wireEvent{UnixMs: ms(now), Event: "snapshot", Resource: kv(keysAndValues, "resource"), Devices: n})
	case "ListAndWatch ended unexpectedly for device plugin":
		res := kv(keysAndValues, "resource")
		sock := ""
		if e, ok := l.last(res, "registered"); ok {
			sock = e.Socket
		}
		l.add(wireEvent{UnixMs: ms(now), Event: "stream_ended", Resource: res, Socket: sock, Reason: errText(err)})
	}
}

func via(p pending) string {
	if p.via == "" {
		return "kubelet.sock"
	}
	return p.via
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// registered: the device manager connected a plugin (its dial and
// GetDevicePluginOptions worked). The socket and options are the device
// manager's own record of them.
func (l *eventLog) registered(now time.Time, res, socket string) {
	l.mu.Lock()
	p := l.began[res]
	l.mu.Unlock()
	var opts *pluginapi.DevicePluginOptions
	if l.dm != nil {
		if dm := l.dm(); dm != nil {
			if socket == "" {
				socket = clientSocket(dm, res)
			}
			opts = endpointOptions(dm, res)
		}
	}
	e := wireEvent{UnixMs: ms(now), Event: "registered", Resource: res, Socket: socket, Via: via(p),
		Version: pluginapi.Version}
	if !p.at.IsZero() {
		e.TookMs = uint64(now.Sub(p.at).Milliseconds())
	}
	if p.via == "plugins_registry" {
		e.Endpoint = p.endpoint
	} else {
		// The kubelet dials filepath.Join(dir, endpoint).
		rel, err := filepath.Rel(devicePluginsDir, socket)
		if err != nil || strings.HasPrefix(rel, "..") {
			rel = socket
		}
		e.Endpoint = rel
	}
	if opts != nil {
		e.PreStartRequired = opts.PreStartRequired
		e.GetPreferredAllocationAvailable = opts.GetPreferredAllocationAvailable
	}
	l.add(e)
}

// field is the (unexported) field `name` of the struct v points at or
// holds, made readable: the referee reads the device manager's state that
// the kubelet keeps private, and changes none of it.
func field(v reflect.Value, name string) reflect.Value {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	f := v.FieldByName(name)
	if !f.IsValid() || !f.CanAddr() {
		return reflect.Value{}
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// locked runs fn holding the sync.Mutex field `name` of v.
func locked(v reflect.Value, name string, fn func()) {
	mu, ok := field(v, name).Addr().Interface().(*sync.Mutex)
	if !ok {
		fn()
		return
	}
	mu.Lock()
	defer mu.Unlock()
	fn()
}

// clientSocket is the socket of the registration server's newest client of
// `res` (server.clients: one per name before 1.37, a list from 1.37).
func clientSocket(dm *devicemanager.ManagerImpl, res string) string {
	srv := field(reflect.ValueOf(dm), "server")
	if !srv.IsValid() {
		return ""
	}
	out := ""
	locked(srv, "mutex", func() {
		clients := field(srv, "clients")
		if !clients.IsValid() || clients.Kind() != reflect.Map {
			return
		}
		c := clients.MapIndex(reflect.ValueOf(res))
		if !c.IsValid() {
			return
		}
		if c.Kind() == reflect.Slice {
			if c.Len() == 0 {
				return
			}
			c = c.Index(c.Len() - 1)
		}
		if s := field(c, "socket"); s.IsValid() && s.Kind() == reflect.String {
			out = s.String()
		}
	})
	return out
}

// endpointOptions is what GetDevicePluginOptions answered, as the device manager stored it.
func endpointOptions(dm *devicemanager.ManagerImpl, res string) *pluginapi.DevicePluginOptions {
	var out *pluginapi.DevicePluginOptions
	v := reflect.ValueOf(dm)
	locked(v, "mutex", func() {
		eps := field(v, "endpoints")
		if !eps.IsValid() || eps.Kind() != reflect.Map {
			return
		}
		info := eps.MapIndex(reflect.ValueOf(res))
		if !info.IsValid() {
			return
		}
		// A map value is not addressable: copy it out first.
		cp := reflect.New(info.Type()).Elem()
		cp.Set(info)
		if o, ok := field(cp, "opts").Interface().(*pluginapi.DevicePluginOptions); ok && o != nil {
			out = &pluginapi.DevicePluginOptions{PreStartRequired: o.PreStartRequired,
				GetPreferredAllocationAvailable: o.GetPreferredAllocationAvailable}
		}
	})
	return out
}

// allDevices is every device of every plugin as the device manager holds
// it (health as the plugin sent it, topology), by resource.
func allDevices(dm *devicemanager.ManagerImpl) map[string][]device {
	out := map[string][]device{}
	v := reflect.ValueOf(dm)
	locked(v, "mutex", func() {
		all := field(v, "allDevices")
		if !all.IsValid() {
			return
		}
		inst, ok := all.Interface().(devicemanager.ResourceDeviceInstances)
		if !ok {
			return
		}
		for res, devs := range inst {
			list := []device{}
			for id, d := range devs {
				numa := []int64{}
				if d.Topology != nil {
					for _, n := range d.Topology.Nodes {
						numa = append(numa, n.ID)
					}
				}
				list = append(list, device{ID: id, Health: d.Health, NumaNodes: numa})
			}
			out[res] = list
		}
	})
	return out
}

// logSink is klog's logger in the referee: every message of the kubelet's
// code goes through observe; messages at verbosity 0 and errors go on to
// stderr as before.
type logSink struct {
	log    *eventLog
	name   string
	values []any
}

func (s *logSink) Init(logr.RuntimeInfo)  {}
func (s *logSink) Enabled(level int) bool { return level <= 2 }
func (s *logSink) Info(level int, msg string, kvs ...any) {
	s.log.observe(nil, msg, kvs)
	if level == 0 {
		fmt.Fprintf(os.Stderr, "I %s %q%s\n", time.Now().Format("15:04:05.000000"), msg, render(append(s.values, kvs...)))
	}
}
func (s *logSink) Error(err error, msg string, kvs ...any) {
	s.log.observe(err, msg, kvs)
	fmt.Fprintf(os.Stderr, "E %s %q err=%q%s\n", time.Now().Format("15:04:05.000000"), msg, errText(err), render(append(s.values, kvs...)))
}
func (s *logSink) WithValues(kvs ...any) logr.LogSink {
	return &logSink{log: s.log, name: s.name, values: append(append([]any{}, s.values...), kvs...)}
}
func (s *logSink) WithName(name string) logr.LogSink {
	return &logSink{log: s.log, name: name, values: s.values}
}

func render(kvs []any) string {
	var b strings.Builder
	for i := 0; i+1 < len(kvs); i += 2 {
		fmt.Fprintf(&b, " %v=%q", kvs[i], fmt.Sprint(kvs[i+1]))
	}
	return b.String()
}
