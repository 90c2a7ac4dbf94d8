package main

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The claims of a manifest are served as written: a claim without
// reservedFor stays reserved for no pod (the kubelet's IsReservedForPod then
// refuses it), one with reservedFor keeps its list; an unknown claim is the
// API server's NotFound, whose text the kubelet wraps ("fetch ResourceClaim ...").
func TestClaimsServedAsWrittenAndNotFound(t *testing.T) {
	r := &referee{api: newAPIServer(), ctx: context.Background()}
	uid := "uid-first"
	claim := claimObject{Namespace: "default", Name: "gpu", UID: "claim-1", Allocated: true,
		Results: []allocationResult{{Request: "r", Driver: "gpu.example.com", Pool: "p", Device: "d"}}}
	r.storeClaims(&podSpec{Name: "first", UID: &uid, ClaimObjects: []claimObject{claim}})
	unreserved, err := r.api.ResourceV1().ResourceClaims("default").Get(r.ctx, "gpu", metav1.GetOptions{})
	if err != nil || len(unreserved.Status.ReservedFor) != 0 {
		t.Fatalf("a claim without reservedFor: %+v, %v", unreserved, err)
	}
	claim.ReservedFor = &[]string{"uid-first", "uid-second"}
	r.storeClaims(&podSpec{Name: "first", UID: &uid, ClaimObjects: []claimObject{claim}})
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
