package kube

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Gateway is one gateway's presence in a namespace: the owner object of
// everything it creates and the Lease it renews while it lives.
type Gateway struct {
	c   *Client
	ns  string
	id  string
	ttl time.Duration
	// Owner is the created owner ConfigMap; OwnerRef(Owner) goes on every
	// object.
	Owner *corev1.ConfigMap

	// warn is told of a renewal that failed (the first of a run of
	// them), of one that works again, and of the loss (Err); nil: none.
	warn func(msg string, err error)

	stop chan struct{}
	done chan struct{}
	once sync.Once
	lost atomic.Pointer[error] // see Err
}

// Err is nil while the gateway's registration stands, and says why once
// it is lost: its lease was found deleted, which another gateway does
// after the lease lapsed (this one could not reach the API for longer
// than the TTL: a sleeping laptop, a network cut), taking every object
// of this gateway with it. Nothing it made is left to start pods with.
func (g *Gateway) Err() error {
	if g == nil {
		return nil
	}
	if p := g.lost.Load(); p != nil {
		return *p
	}
	return nil
}

// DefaultLeaseTTL is how long a gateway's lease lasts unrenewed.
const DefaultLeaseTTL = 30 * time.Second

// Register creates gateway id's owner object and its Lease (owned by the
// owner, so it goes with it) and renews the lease every ttl/3 until
// Close, telling warn (if not nil) of renewals that fail. Zero ttl:
// DefaultLeaseTTL.
func Register(ctx context.Context, c *Client, ns, id string, ttl time.Duration, warn func(msg string, err error)) (*Gateway, error) {
	if ttl == 0 {
		ttl = DefaultLeaseTTL
	}
	g := &Gateway{c: c, ns: ns, id: id, ttl: ttl, warn: warn, stop: make(chan struct{}), done: make(chan struct{})}
	var owner corev1.ConfigMap
	if err := c.Create(ctx, ConfigMaps, ns, Owner(id), &owner); err != nil {
		return nil, fmt.Errorf("registering gateway %s: %w", id, err)
	}
	g.Owner = &owner
	now := metav1.NewMicroTime(time.Now())
	secs := int32(ttl / time.Second)
	holder := "mcpbox-" + id
	lease := &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: LeaseName(id), Labels: Labels(id, "", RoleOwner),
			OwnerReferences: []metav1.OwnerReference{OwnerRef(&owner)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs,
			AcquireTime: &now, RenewTime: &now},
	}
	if err := c.Create(ctx, Leases, ns, lease, nil); err != nil {
		_ = c.Delete(ctx, ConfigMaps, ns, owner.Name)
		return nil, fmt.Errorf("registering gateway %s: %w", id, err)
	}
	go g.renew()
	return g, nil
}

// ID is the gateway's id.
func (g *Gateway) ID() string { return g.id }

// Ref is the owner reference every object of the gateway carries.
func (g *Gateway) Ref() metav1.OwnerReference { return OwnerRef(g.Owner) }

func (g *Gateway) renew() {
	defer close(g.done)
	t := time.NewTicker(g.ttl / 3)
	defer t.Stop()
	failing := 0 // renewals failed in a row
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), g.ttl/3)
		now := metav1.NewMicroTime(time.Now())
		err := g.c.Patch(ctx, Leases, g.ns, LeaseName(g.id), map[string]any{"spec": map[string]any{"renewTime": now}}, nil)
		cancel()
		switch {
		case IsNotFound(err):
			lost := fmt.Errorf("kubernetes namespace %s: this gateway's objects (pods, egress proxy, secrets) were deleted: its lease was not renewed for over %v (the API was out of reach), and another gateway collected them; restart mcpbox serve", g.ns, g.ttl)
			g.lost.Store(&lost)
			if g.warn != nil {
				g.warn("the gateway's lease is gone", lost)
			}
			return
		case err != nil && failing == 0 && g.warn != nil:
			g.warn(fmt.Sprintf("renewing the gateway's lease failed; once it lapses (%v unrenewed) another gateway starting in namespace %s will delete this one's pods", g.ttl, g.ns), err)
		case err == nil && failing > 0 && g.warn != nil:
			g.warn(fmt.Sprintf("renewing the gateway's lease works again after %d failures", failing), nil)
		}
		if err != nil {
			failing++
		} else {
			failing = 0
		}
	}
}

// Close stops renewing and deletes the owner object: the garbage
// collector removes every object of the gateway.
func (g *Gateway) Close(ctx context.Context) error {
	g.once.Do(func() { close(g.stop) })
	<-g.done
	return g.c.Delete(ctx, ConfigMaps, g.ns, g.Owner.Name)
}

// Abandon stops renewing without deleting anything, as a crash would
// (for tests of the cleanup).
func (g *Gateway) Abandon() {
	g.once.Do(func() { close(g.stop) })
	<-g.done
}

// CollectExpired deletes the owner objects of the gateways in ns whose
// lease expired more than grace ago (their gateway died), and those of
// owners without a lease older than the lease TTL (a gateway that died
// between the two creates). It returns the ids it collected.
func CollectExpired(ctx context.Context, c *Client, ns string, now time.Time) ([]string, error) {
	var owners corev1.ConfigMapList
	if err := c.List(ctx, ConfigMaps, ns, LabelManagedBy+"="+ManagedBy+","+LabelRole+"="+RoleOwner, &owners); err != nil {
		return nil, err
	}
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, Leases, ns, LabelManagedBy+"="+ManagedBy+","+LabelRole+"="+RoleOwner, &leases); err != nil {
		return nil, err
	}
	live := map[string]bool{}
	for _, l := range leases.Items {
		live[l.Labels[LabelGateway]] = !expired(&l, now)
	}
	var out []string
	for _, o := range owners.Items {
		id := o.Labels[LabelGateway]
		alive, hasLease := live[id]
		switch {
		case alive:
			continue
		case !hasLease && now.Sub(o.CreationTimestamp.Time) < DefaultLeaseTTL:
			continue // just registering
		}
		if err := c.Delete(ctx, ConfigMaps, ns, o.Name); err != nil {
			return out, err
		}
		out = append(out, id)
	}
	return out, nil
}

func expired(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}
