// Command dpctl-referee runs one kubelet release's own device manager,
// Topology Manager, CPU and memory managers, plugin manager and
// PodResources server, and answers dpctl's kubelet-sim control protocol, so
// dpctl can compare its kubelet-sim with the kubelet's code. See
// conformance/README.md.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	_ "k8s.io/kubernetes/pkg/features" // registers the kubelet's feature gates and their defaults
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/utils/cpuset"
)

// moduleVersion is the k8s.io/kubernetes version this binary was built with.
func moduleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/kubernetes" {
				return d.Version
			}
		}
	}
	return "unknown"
}

// release is "1.37" for "v1.37.2".
func release(module string) string {
	parts := strings.SplitN(strings.TrimPrefix(module, "v"), ".", 3)
	if len(parts) < 2 {
		return module
	}
	return parts[0] + "." + parts[1]
}

func usageExit(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "dpctl-referee: "+format+"\n", args...)
	os.Exit(exitUsage)
}

func parseKV(s, flagName string) map[string]string {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			usageExit("%s %s: %q: expected KEY=VALUE", flagName, s, item)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

func parseDistances(s string) [][]uint64 {
	var rows [][]uint64
	for i, row := range strings.Split(s, ";") {
		var r []uint64
		for _, v := range strings.Split(row, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				usageExit("--numa-distances %s: row %d: %q is not a whole number", s, i, strings.TrimSpace(v))
			}
			r = append(r, n)
		}
		rows = append(rows, r)
	}
	return rows
}

func main() {
	cfg := refConfig{}
	var featureGates, tmOptions, reserved, distances string
	var showVersion bool
	flag.StringVar(&cfg.controlSocket, "control-socket", filepath.Join(devicePluginsDir, ".dpctl", "kubelet-sim.sock"), "the control socket")
	flag.StringVar(&cfg.podresourcesSocket, "podresources-socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "the PodResources socket")
	flag.StringVar(&cfg.registryDir, "registry-dir", "/var/lib/kubelet/plugins_registry", "the plugin manager's directory")
	flag.StringVar(&cfg.draStateDir, "dra-state-dir", "", "where the DRA manager keeps dra_manager_state (default: the parent of --registry-dir, the kubelet's root)")
	flag.StringVar(&cfg.tmPolicy, "topology-manager-policy", "none", "none|best-effort|restricted|single-numa-node")
	flag.StringVar(&cfg.tmScope, "topology-manager-scope", "container", "container|pod")
	flag.StringVar(&tmOptions, "topology-manager-policy-options", "", "KEY=VALUE,...")
	flag.StringVar(&cfg.cpuPolicy, "cpu-manager-policy", "none", "none|static")
	flag.StringVar(&reserved, "reserved-cpus", "", "a CPU list, e.g. 0 or 0-1")
	flag.IntVar(&cfg.numaNodes, "numa-nodes", 2, "NUMA nodes of the machine")
	flag.IntVar(&cfg.cpusPerNuma, "cpus-per-numa", 8, "CPUs per NUMA node")
	flag.StringVar(&distances, "numa-distances", "", "rows separated by ';', values by ',' (e.g. 10,21;21,10)")
	flag.StringVar(&featureGates, "feature-gates", "", "KEY=BOOL,... (the kubelet's feature gates; defaults are the release's)")
	flag.BoolVar(&showVersion, "version", false, "print the kubelet version and exit")
	klog.InitFlags(nil)
	flag.Parse()

	module := moduleVersion()
	if showVersion {
		fmt.Printf("dpctl-referee kubelet %s\n", module)
		return
	}
	if flag.NArg() > 0 {
		usageExit("unexpected argument %q", flag.Arg(0))
	}
	if featureGates != "" {
		if err := utilfeature.DefaultMutableFeatureGate.Set(featureGates); err != nil {
			usageExit("--feature-gates %s: %v", featureGates, err)
		}
	}
	if cfg.draStateDir == "" {
		cfg.draStateDir = filepath.Dir(filepath.Clean(cfg.registryDir))
	}
	cfg.tmOptions = parseKV(tmOptions, "--topology-manager-policy-options")
	if reserved != "" {
		set, err := cpuset.Parse(reserved)
		if err != nil {
			usageExit("--reserved-cpus %s: %v", reserved, err)
		}
		cfg.reservedCPUs = set
	}
	if cfg.numaNodes < 1 || cfg.numaNodes > 64 {
		usageExit("--numa-nodes %d: outside 1..=64", cfg.numaNodes)
	}
	if cfg.cpusPerNuma < 1 || cfg.numaNodes*cfg.cpusPerNuma > 4096 {
		usageExit("--cpus-per-numa %d: at least 1, at most 4096 CPUs in all", cfg.cpusPerNuma)
	}
	if distances != "" {
		cfg.distances = parseDistances(distances)
		if len(cfg.distances) != cfg.numaNodes {
			usageExit("--numa-distances %s: needs %d rows of %d values", distances, cfg.numaNodes, cfg.numaNodes)
		}
		for _, row := range cfg.distances {
			if len(row) != cfg.numaNodes {
				usageExit("--numa-distances %s: needs %d rows of %d values", distances, cfg.numaNodes, cfg.numaNodes)
			}
		}
	}

	// The device manager's registration messages are at verbosity 2; the
	// referee reads them as events (events.go) and prints only level 0.
	if f := flag.Lookup("v"); f != nil && f.Value.String() == "0" {
		_ = f.Value.Set("2")
	}
	events := &eventLog{began: map[string]pending{}}
	klog.SetLoggerWithOptions(logr.New(&logSink{log: events}), klog.ContextualLogger(true))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	stateDir, err := os.MkdirTemp("", "dpctl-referee-state-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "dpctl-referee: %v\n", err)
		os.Exit(exitFailure)
	}
	r := &referee{cfg: cfg, module: module, release: release(module), machine: buildMachine(cfg), stateDir: stateDir,
		ctx: ctx, logger: logger, node: &v1.Node{}, events: events, deleted: sets.New[string](), api: newAPIServer()}
	r.node.Name = "dpctl-referee"
	events.dm = r.deviceManager
	m, err := r.start(containermap.NewContainerMap(), sets.New[string]())
	if err != nil {
		fmt.Fprintf(os.Stderr, "dpctl-referee: %v\n", err)
		_ = os.RemoveAll(stateDir)
		if errors.As(err, new(configError)) {
			os.Exit(exitUsage)
		}
		os.Exit(exitFailure)
	}
	r.m = m

	// The control socket comes last: once it answers, everything serves.
	if err := os.MkdirAll(filepath.Dir(cfg.controlSocket), 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "dpctl-referee: %v\n", err)
		os.Exit(exitFailure)
	}
	_ = os.Remove(cfg.controlSocket)
	ln, err := net.Listen("unix", cfg.controlSocket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dpctl-referee: control socket: %v\n", err)
		os.Exit(exitFailure)
	}
	logger.Info("dpctl-referee serving", "kubelet", module, "control", cfg.controlSocket)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		r.turn.Lock() // no operation half done
		_ = ln.Close()
		_ = os.Remove(cfg.controlSocket)
		r.stop(r.m)
		_ = os.Remove(cfg.podresourcesSocket)
		_ = os.RemoveAll(stateDir)
		os.Exit(0)
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			select {} // closing: the signal handler exits
		}
		go r.serve(conn)
	}
}

// serve answers the requests of one control connection, one JSON line each.
func (r *referee) serve(conn net.Conn) {
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	enc := json.NewEncoder(conn)
	for sc.Scan() {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var req request
		var reply any
		if err := json.Unmarshal(line, &req); err != nil {
			reply = errReply(exitUsage, fmt.Sprintf("bad control request: %v", err))
		} else {
			reply = r.handle(req)
		}
		if err := enc.Encode(reply); err != nil {
			return
		}
	}
}
