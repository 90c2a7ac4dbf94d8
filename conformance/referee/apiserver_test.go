package main

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The claims of a manifest are served as the API server would: a claim
// without reservedFor is reserved for the pod naming it, and a second pod
// naming the same claim is added; an unknown claim is the API server's
// NotFound, whose text the kubelet wraps ("fetch ResourceClaim ...").
func TestClaimsServedWithReservationsAndNotFound(t *testing.T) {
	r := &referee{api: newAPIServer(), ctx: context.Background()}
	claim := claimObject{Namespace: "default", Name: "gpu", UID: "claim-1", Allocated: true,
		Results: []allocationResult{{Request: "r", Driver: "gpu.example.com", Pool: "p", Device: "d"}}}
	for _, pod := range []string{"first", "second"} {
		uid := "uid-" + pod
		r.storeClaims(&podSpec{Name: pod, UID: &uid, ClaimObjects: []claimObject{claim}})
	}
	got, err := r.api.ResourceV1().ResourceClaims("default").Get(r.ctx, "gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ReservedFor) != 2 || got.Status.ReservedFor[1].UID != "uid-second" {
		t.Fatalf("reservedFor: %+v", got.Status.ReservedFor)
	}
	if got.Status.Allocation == nil || got.Status.Allocation.Devices.Results[0].Driver != "gpu.example.com" {
		t.Fatalf("allocation: %+v", got.Status.Allocation)
	}
	_, err = r.api.ResourceV1().ResourceClaims("other").Get(r.ctx, "gpu", metav1.GetOptions{})
	if err == nil || err.Error() != `resourceclaims.resource.k8s.io "gpu" not found` {
		t.Fatalf("missing claim: %v", err)
	}
}
