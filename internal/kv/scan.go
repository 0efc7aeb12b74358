package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/redis/go-redis/v9"
)

// ErrCannotScan is what a walk over a store without Scanner reports.
var ErrCannotScan = errors.New("oauthflow: this KV cannot list its keys")

// ScanPrefix walks the keys of the store under the prefix that start with
// prefix, and gives them back without it.
func (p *Prefixed) ScanPrefix(ctx context.Context, prefix, cursor string, count int) ([]string, string, error) {
	s, ok := p.s.(Scanner)
	if !ok {
		return nil, "", ErrCannotScan
	}
	keys, next, err := s.ScanPrefix(ctx, p.prefix+prefix, cursor, count)
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, p.prefix)
	}
	return keys, next, err
}

// ScanPrefix walks the keys in order; the cursor is the last key returned.
func (m *Memory) ScanPrefix(_ context.Context, prefix, cursor string, count int) ([]string, string, error) {
	now := m.clock().UnixNano()
	m.mu.RLock()
	var keys []string
	for k, e := range m.m {
		if strings.HasPrefix(k, prefix) && k > cursor && e.live(now) {
			keys = append(keys, k)
		}
	}
	m.mu.RUnlock()
	slices.Sort(keys)
	if len(keys) <= count {
		return keys, "", nil
	}
	keys = keys[:count]
	return keys, keys[count-1], nil
}

// ScanPrefix runs SCAN with MATCH. On a Cluster it walks every master in turn,
// in address order; the cursor names the master and its own SCAN cursor.
func (r *Redis) ScanPrefix(ctx context.Context, prefix, cursor string, count int) ([]string, string, error) {
	match := escapeGlob(prefix) + "*"
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		n, err := scanCursor(cursor)
		if err != nil {
			return nil, "", err
		}
		keys, next, err := r.c.Scan(ctx, n, match, int64(count)).Result()
		if err != nil || next == 0 {
			return keys, "", err
		}
		return keys, strconv.FormatUint(next, 10), nil
	}
	return scanCluster(ctx, cc, match, cursor, count)
}

func scanCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errs.Invalid("scan cursor %q is not one this store gave", s)
	}
	return n, nil
}

func scanCluster(ctx context.Context, cc *redis.ClusterClient, match, cursor string, count int) ([]string, string, error) {
	masters, err := clusterMasters(ctx, cc)
	if err != nil {
		return nil, "", err
	}
	i, n := 0, uint64(0)
	if cursor != "" {
		addr, pos, _ := strings.Cut(cursor, " ")
		i = slices.IndexFunc(masters, func(c *redis.Client) bool { return c.Options().Addr == addr })
		if n, err = scanCursor(pos); err != nil || i < 0 {
			return nil, "", errs.Invalid("scan cursor %q names no master of this cluster", cursor)
		}
	}
	keys, next, err := masters[i].Scan(ctx, n, match, int64(count)).Result()
	switch {
	case err != nil:
		return nil, "", err
	case next != 0:
		return keys, masters[i].Options().Addr + " " + strconv.FormatUint(next, 10), nil
	case i+1 < len(masters):
		return keys, masters[i+1].Options().Addr + " 0", nil
	}
	return keys, "", nil
}

// clusterMasters returns a client for each master, in address order.
func clusterMasters(ctx context.Context, cc *redis.ClusterClient) ([]*redis.Client, error) {
	ch := make(chan *redis.Client, 64)
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		select {
		case ch <- c:
			return nil
		default:
			return fmt.Errorf("oauthflow: more than %d cluster masters", cap(ch))
		}
	})
	close(ch)
	if err != nil {
		return nil, err
	}
	var masters []*redis.Client
	for c := range ch {
		masters = append(masters, c)
	}
	slices.SortFunc(masters, func(a, b *redis.Client) int { return strings.Compare(a.Options().Addr, b.Options().Addr) })
	return masters, nil
}

// escapeGlob quotes the characters MATCH treats as a pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if strings.IndexByte(`*?[]\`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}
