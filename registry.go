package oauthflow

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/suggest"
)

// Registry holds the providers a host app registered. It is safe for concurrent use.
//
// Providers under a resolver's prefix (AddResolver: an MCP server's, one
// per server URL an agent meets) are a cache of what their resolver builds
// from the store: at most 1024 of them are kept, and the one used least
// recently is dropped for a new one (Get builds it again when asked).
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
	resolved  map[string]*resolvedEntry
	uses      atomic.Uint64 // the clock of resolvedEntry.used
	resolvers []resolver
	watch     func(Provider) // hears each provider the app registers (New's redirect check)
}

// resolvedEntry is a provider a resolver built, and when it was last got.
type resolvedEntry struct {
	p    Provider
	used atomic.Uint64
}

// maxResolved bounds the providers a registry keeps of those its resolvers built.
const maxResolved = 1024

// resolver builds providers the registry does not hold yet, for IDs under prefix.
type resolver struct {
	prefix  string
	resolve func(id string) (Provider, error)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{providers: make(map[string]Provider)} }

// Register adds p. It fails on a nil provider, an invalid or empty ID, or an ID
// that is already registered.
func (r *Registry) Register(p Provider) (err error) {
	if errs.IsNil(p) {
		return errs.Invalid("nil provider")
	}
	defer func() {
		if r := recover(); r != nil {
			err = errs.Invalid("provider's ProviderID panicked: %v", r)
		}
	}()
	id := p.ProviderID()
	if !keyspace.ValidProviderID(id) {
		return errs.Invalid("provider ID %q: want 1-64 of [A-Za-z0-9._-], starting with a letter or digit", id)
	}
	watch, err := r.add(id, p)
	if err == nil && watch != nil {
		watch(p)
	}
	return err
}

// add keeps p as id and returns the watch to tell of it (nil for one a
// resolver builds, which is kept among the resolved ones).
func (r *Registry) add(id string, p Provider) (func(Provider), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.providers == nil {
		r.providers = make(map[string]Provider)
	}
	if _, dup := r.providers[id]; dup || r.resolved[id] != nil {
		return nil, fmt.Errorf("%w: provider %q is already registered", ErrInvalidArgument, id)
	}
	if r.resolvable(id) {
		r.keepResolved(id, p)
		return nil, nil
	}
	r.providers[id] = p
	return r.watch, nil
}

// watchRegistered has fn hear every provider the app has registered and
// registers from now on (not those a resolver builds).
func (r *Registry) watchRegistered(fn func(Provider)) {
	r.mu.Lock()
	r.watch = fn
	ps := make([]Provider, 0, len(r.providers))
	for _, id := range slices.Sorted(maps.Keys(r.providers)) {
		ps = append(ps, r.providers[id])
	}
	r.mu.Unlock()
	for _, p := range ps {
		fn(p)
	}
}

// resolvable reports whether a resolver builds id: such a provider is kept
// among the resolved ones, bounded. r.mu is held.
func (r *Registry) resolvable(id string) bool {
	for _, res := range r.resolvers {
		if strings.HasPrefix(id, res.prefix) {
			return true
		}
	}
	return false
}

// keepResolved adds p among the resolved providers, letting go of the one
// used least recently when they are maxResolved. r.mu is held.
func (r *Registry) keepResolved(id string, p Provider) {
	if r.resolved == nil {
		r.resolved = make(map[string]*resolvedEntry)
	}
	if len(r.resolved) >= maxResolved {
		oldest, at := "", uint64(0)
		for k, e := range r.resolved {
			if u := e.used.Load(); oldest == "" || u < at {
				oldest, at = k, u
			}
		}
		delete(r.resolved, oldest)
	}
	e := &resolvedEntry{p: p}
	e.used.Store(r.uses.Add(1))
	r.resolved[id] = e
}

// Get returns the provider registered as id; one that is not, but that a
// resolver added with AddResolver builds, is registered and returned; else
// ErrUnknownProvider, naming the nearest registered ID when one is close
// ("did you mean"). IDs are case-sensitive.
func (r *Registry) Get(id string) (Provider, error) {
	r.mu.RLock()
	p, ok := r.providers[id]
	e := r.resolved[id]
	resolvers := r.resolvers
	r.mu.RUnlock()
	if ok {
		return p, nil
	}
	if e != nil {
		e.used.Store(r.uses.Add(1))
		return e.p, nil
	}
	for _, res := range resolvers {
		if strings.HasPrefix(id, res.prefix) {
			return r.resolve(res, id)
		}
	}
	return nil, fmt.Errorf("%w: %q%s", ErrUnknownProvider, id, suggest.Hint(id, r.IDs()))
}

// AddResolver has Get build the providers whose IDs start with prefix when
// they are not registered yet: providers that an app registers at run time
// (an MCP server's, met by one instance) and that another instance must
// serve (the callback of a sign-in it did not start). resolve answers
// ErrUnknownProvider (wrapped) for an ID it does not know; the provider it
// returns must have the ID it was asked for. Setup only.
func (r *Registry) AddResolver(prefix string, resolve func(id string) (Provider, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resolvers = append(r.resolvers, resolver{prefix: prefix, resolve: resolve})
}

// resolve builds id with res and registers it, unless another caller did
// first: then that one is returned.
func (r *Registry) resolve(res resolver, id string) (p Provider, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			p, err = nil, fmt.Errorf("oauthflow: resolving provider %q panicked: %v", id, rec)
		}
	}()
	p, err = res.resolve(id)
	if err != nil {
		return nil, err
	}
	if errs.IsNil(p) || p.ProviderID() != id {
		return nil, fmt.Errorf("%w: the resolver for %q built another provider", ErrUnknownProvider, id)
	}
	if err := r.Register(p); err != nil {
		r.mu.RLock()
		first, ok := r.providers[id] // another caller's, registered meanwhile
		if e := r.resolved[id]; e != nil {
			first, ok = e.p, true
		}
		r.mu.RUnlock()
		if !ok {
			return nil, err
		}
		return first, nil
	}
	return p, nil
}

// knows reports whether id is registered or under a resolver's prefix: a
// provider Get may build, without building it.
func (r *Registry) knows(id string) bool {
	if r.Has(id) {
		return true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.resolvable(id)
}

// Has reports whether a provider is registered as id.
func (r *Registry) Has(id string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.providers[id]
	return ok || r.resolved[id] != nil
}

// bound is the most providers the registry holds at once: the app's own
// and maxResolved of those its resolvers built. A cache kept per provider
// (success pages, refresh limits) holds no more than this: it lets go of
// what it kept for the providers the registry let go.
func (r *Registry) bound() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.providers) + maxResolved
}

// IDs returns the registered provider IDs, sorted: the app's own, and those
// its resolvers built that the registry keeps now.
func (r *Registry) IDs() []string {
	r.mu.RLock()
	ids := make([]string, 0, len(r.providers)+len(r.resolved))
	for id := range r.providers {
		ids = append(ids, id)
	}
	for id := range r.resolved {
		ids = append(ids, id)
	}
	r.mu.RUnlock()
	sort.Strings(ids)
	return ids
}

// ownIDs returns the IDs of the providers the app registered itself, not
// those its resolvers built, sorted.
func (r *Registry) ownIDs() []string {
	r.mu.RLock()
	ids := make([]string, 0, len(r.providers))
	for id := range r.providers {
		ids = append(ids, id)
	}
	r.mu.RUnlock()
	sort.Strings(ids)
	return ids
}
