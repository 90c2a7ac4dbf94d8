// dpctl-dra-driver: a small DRA driver built on the kubeletplugin helper
// of k8s.io/dynamic-resource-allocation, as vendors build theirs. It is
// dpctl's interop peer for the DRA side: it needs an API server (dpctl
// apiserver serves one from a file), registers on plugins_registry,
// publishes one ResourceSlice for its node, prepares claims by writing one
// CDI spec file per claim and unprepares them by removing it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

var version = "dev"

type config struct {
	kubeconfig  string
	nodeName    string
	driverName  string
	registryDir string
	pluginDir   string
	cdiDir      string
	devices     int
	rollingUID  string
}

func main() {
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the API server (required; dpctl apiserver writes one)")
	flag.StringVar(&c.nodeName, "node-name", "", "the node this driver runs on (required; its Node must exist in the API)")
	flag.StringVar(&c.driverName, "driver-name", "gpu.dpctl.example", "DRA driver name")
	flag.StringVar(&c.registryDir, "registry-dir", kubeletplugin.KubeletRegistryDir, "the kubelet's plugins_registry directory")
	flag.StringVar(&c.pluginDir, "plugin-dir", "", "directory of the DRA service socket (default /var/lib/kubelet/plugins/<driver>)")
	flag.StringVar(&c.cdiDir, "cdi-dir", "/var/run/cdi", "where prepared claims' CDI spec files go")
	flag.IntVar(&c.devices, "devices", 2, "devices published in the node's pool (gpu-0 ...)")
	flag.StringVar(&c.rollingUID, "rolling-update-uid", "", "run beside another instance (a rolling update): the helper's RollingUpdate option with this pod UID, which names the sockets")
	showVersion := flag.Bool("version", false, "print the version and exit")
	klog.InitFlags(nil)
	flag.Parse()
	if *showVersion {
		fmt.Printf("dpctl-dra-driver %s\n", version)
		return
	}
	if err := run(c); err != nil {
		fmt.Fprintf(os.Stderr, "dpctl-dra-driver: %v\n", err)
		os.Exit(1)
	}
}

func run(c config) error {
	if c.kubeconfig == "" || c.nodeName == "" {
		return errors.New("--kubeconfig and --node-name are required")
	}
	if c.devices < 1 || c.devices > 128 {
		return fmt.Errorf("--devices %d: want 1..128", c.devices)
	}
	restConfig, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s: %w", c.kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if err := os.MkdirAll(c.cdiDir, 0o755); err != nil {
		return fmt.Errorf("create --cdi-dir: %w", err)
	}
	d := &driver{cfg: c, cancel: cancel}
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(c.driverName),
		kubeletplugin.NodeName(c.nodeName),
		kubeletplugin.KubeClient(client),
		kubeletplugin.RegistrarDirectoryPath(c.registryDir),
		kubeletplugin.HealthService(false),
	}
	if c.pluginDir == "" {
		c.pluginDir = filepath.Join(kubeletplugin.KubeletPluginsDir, c.driverName)
	}
	// The helper listens in these directories but does not create them.
	for _, dir := range []string{c.pluginDir, c.registryDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
	}
	opts = append(opts, kubeletplugin.PluginDataDirectoryPath(c.pluginDir))
	if c.rollingUID != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(types.UID(c.rollingUID)))
	}
	helper, err := kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		return fmt.Errorf("start the kubeletplugin helper: %w", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, d.resources()); err != nil {
		return fmt.Errorf("publish resources: %w", err)
	}
	fmt.Printf("dpctl-dra-driver %s: driver %s on node %s started\n", version, c.driverName, c.nodeName)
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

type driver struct {
	cfg    config
	cancel context.CancelCauseFunc

	mu sync.Mutex // the helper serializes calls; this guards against Serialize(false)
}

func (d *driver) resources() resourceslice.DriverResources {
	var devices []resourceapi.Device
	for i := 0; i < d.cfg.devices; i++ {
		devices = append(devices, resourceapi.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		d.cfg.nodeName: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
}

// cdiKind is the CDI kind of the driver's devices: <driver name>/gpu.
func (d *driver) cdiKind() string { return d.cfg.driverName + "/gpu" }

func (d *driver) specPath(uid types.UID) string {
	return filepath.Join(d.cfg.cdiDir, fmt.Sprintf("%s-%s.json", strings.ReplaceAll(d.cfg.driverName, "/", "_"), uid))
}

type cdiSpec struct {
	CDIVersion string      `json:"cdiVersion"`
	Kind       string      `json:"kind"`
	Devices    []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string          `json:"name"`
	ContainerEdits cdiEditsWithEnv `json:"containerEdits"`
}

type cdiEditsWithEnv struct {
	Env []string `json:"env"`
}

func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	result := map[types.UID]kubeletplugin.PrepareResult{}
	for _, claim := range claims {
		result[claim.UID] = d.prepareClaim(claim)
	}
	return result, nil
}

func (d *driver) prepareClaim(claim *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	spec := cdiSpec{CDIVersion: "0.6.0", Kind: d.cdiKind()}
	var devices []kubeletplugin.Device
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.cfg.driverName {
			continue
		}
		name := fmt.Sprintf("%s-%s", claim.UID, r.Device)
		spec.Devices = append(spec.Devices, cdiDevice{Name: name, ContainerEdits: cdiEditsWithEnv{
			Env: []string{fmt.Sprintf("DPCTL_DRA_DEVICE_%s=%s", strings.ReplaceAll(r.Device, "-", "_"), r.Device)},
		}})
		devices = append(devices, kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{d.cdiKind() + "=" + name},
		})
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err == nil {
		tmp := d.specPath(claim.UID) + ".tmp"
		if err = os.WriteFile(tmp, data, 0o644); err == nil {
			err = os.Rename(tmp, d.specPath(claim.UID))
		}
	}
	if err != nil {
		return kubeletplugin.PrepareResult{Err: fmt.Errorf("write CDI spec for claim %s/%s: %w", claim.Namespace, claim.Name, err)}
	}
	return kubeletplugin.PrepareResult{Devices: devices}
}

func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	result := map[types.UID]error{}
	for _, claim := range claims {
		err := os.Remove(d.specPath(claim.UID))
		if errors.Is(err, os.ErrNotExist) {
			err = nil // idempotent: unprepared before, or never prepared here
		}
		result[claim.UID] = err
	}
	return result, nil
}

func (d *driver) HandleError(ctx context.Context, err error, msg string) {
	fmt.Fprintf(os.Stderr, "dpctl-dra-driver: %s: %v\n", msg, err)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) {
		d.cancel(fmt.Errorf("%s: %w", msg, err))
	}
}

func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}
