// Writes DRA wire vectors with the kubelet's own generated types
// (k8s.io/kubelet v0.37.2) and Google's protobuf runtime.
package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	hv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	hv1a1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drav1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drav1b1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
)

type vec struct {
	Message string          `json:"message"`
	Content json.RawMessage `json:"content"`
	Hex     string          `json:"hex"`
}

func main() {
	share := "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
	claim := func() *drav1.Claim { return &drav1.Claim{Namespace: "default", Uid: "067798be-454e-4be4-9047-1aa06aea63f7", Name: "gpu"} }
	msgs := []proto.Message{
		&drav1.NodePrepareResourcesRequest{Claims: []*drav1.Claim{claim(), {Namespace: "team-a", Uid: "u-2", Name: "big"}}},
		&drav1.NodePrepareResourcesResponse{Claims: map[string]*drav1.NodePrepareResourceResponse{"u-1": {Devices: []*drav1.Device{{RequestNames: []string{"gpu", "gpu/sub"}, PoolName: "pool-0", DeviceName: "dev-0", CdiDeviceIds: []string{"example.com/gpu=dev-0"}, ShareId: &share}}}}},
		&drav1.NodePrepareResourcesResponse{Claims: map[string]*drav1.NodePrepareResourceResponse{"u-2": {Error: "no free device"}}},
		&drav1.NodeUnprepareResourcesRequest{Claims: []*drav1.Claim{claim()}},
		&drav1.NodeUnprepareResourcesResponse{Claims: map[string]*drav1.NodeUnprepareResourceResponse{"u-1": {Error: "busy"}}},
		&drav1b1.NodePrepareResourcesRequest{Claims: []*drav1b1.Claim{{Namespace: "default", Uid: "u-1", Name: "gpu"}}},
		&drav1b1.NodePrepareResourcesResponse{Claims: map[string]*drav1b1.NodePrepareResourceResponse{"u-1": {Devices: []*drav1b1.Device{{PoolName: "pool-0", DeviceName: "dev-0", CdiDeviceIds: []string{"example.com/gpu=dev-0", "example.com/gpu=meta"}}}}}},
		&drav1b1.NodeUnprepareResourcesResponse{Claims: map[string]*drav1b1.NodeUnprepareResourceResponse{"u-1": {}}},
		&hv1a1.NodeWatchResourcesRequest{},
		&hv1a1.NodeWatchResourcesResponse{Devices: []*hv1a1.DeviceHealth{{Device: &hv1a1.DeviceIdentifier{PoolName: "pool-0", DeviceName: "dev-0"}, Health: hv1a1.HealthStatus_HEALTHY, LastUpdatedTime: 1795662234, HealthCheckTimeoutSeconds: 30, Message: "ok"}, {Device: &hv1a1.DeviceIdentifier{PoolName: "pool-0", DeviceName: "dev-1"}, Health: hv1a1.HealthStatus_UNHEALTHY}}},
		&hv1.NodeWatchResourcesResponse{Devices: []*hv1.DeviceHealth{{Device: &hv1.DeviceIdentifier{PoolName: "p", DeviceName: "d"}, Health: hv1.HealthStatus_UNKNOWN, LastUpdatedTime: -1}}},
	}
	var out []vec
	for _, m := range msgs {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			panic(err)
		}
		j, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
		if err != nil {
			panic(err)
		}
		out = append(out, vec{string(m.ProtoReflect().Descriptor().FullName()), json.RawMessage(j), hex.EncodeToString(b)})
	}
	doc := map[string]any{"about": "DRA kubelet plugin messages encoded by Google's protobuf runtime (google.golang.org/protobuf) from the kubelet's own generated Go types, k8s.io/kubelet v0.37.2 (pkg/apis/dra/v1, dra/v1beta1, dra-health/v1alpha1, dra-health/v1). Content: the proto JSON mapping with proto field names; hex: the deterministic binary encoding. Maps hold one entry.", "vectors": out}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
