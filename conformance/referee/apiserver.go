package main

// The API server the DRA manager reads ResourceClaims from. pkg/kubelet/cm/dra
// makes two calls on its clientset in 1.34-1.37: ResourceClaims(ns).Get
// before preparing a pod (manager.go) and ResourceSlices().DeleteCollection
// to wipe the node's slices (plugin/dra_plugin_manager.go). The referee
// serves exactly those from the claims of the admitted pods' manifests, with
// the API server's own NotFound error; client-go's fake clientset would do
// the same but links every typed client in (about 20 MB more per binary).
// Any other call reaches the nil embedded interface and panics, naming it.

import (
	"context"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
)

type apiServer struct {
	kubernetes.Interface
	mu     sync.Mutex
	claims map[string]*resourceapi.ResourceClaim // namespace/name
}

func newAPIServer() *apiServer {
	return &apiServer{claims: map[string]*resourceapi.ResourceClaim{}}
}

func (a *apiServer) get(namespace, name string) (*resourceapi.ResourceClaim, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.claims[namespace+"/"+name]
	if !ok {
		return nil, false
	}
	return c.DeepCopy(), true
}

func (a *apiServer) put(c *resourceapi.ResourceClaim) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.claims[c.Namespace+"/"+c.Name] = c.DeepCopy()
}

func (a *apiServer) ResourceV1() resourcev1.ResourceV1Interface { return resourceGroup{a: a} }

type resourceGroup struct {
	resourcev1.ResourceV1Interface
	a *apiServer
}

func (g resourceGroup) ResourceClaims(namespace string) resourcev1.ResourceClaimInterface {
	return claimClient{a: g.a, namespace: namespace}
}

func (g resourceGroup) ResourceSlices() resourcev1.ResourceSliceInterface { return sliceClient{} }

type claimClient struct {
	resourcev1.ResourceClaimInterface
	a         *apiServer
	namespace string
}

func (c claimClient) Get(_ context.Context, name string, _ metav1.GetOptions) (*resourceapi.ResourceClaim, error) {
	if claim, ok := c.a.get(c.namespace, name); ok {
		return claim, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), name)
}

// sliceClient: the node has no ResourceSlices; wiping them succeeds.
type sliceClient struct {
	resourcev1.ResourceSliceInterface
}

func (sliceClient) DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error {
	return nil
}
