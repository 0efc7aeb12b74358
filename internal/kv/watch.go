package kv

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/xcontext"
	"github.com/redis/go-redis/v9"
)

// A process that finds a refresh lock taken waits for the holder to finish.
// Polling alone makes the last of a thousand callers wait up to a poll
// interval after the winner's write; a ReleaseWatcher lets the holder say "I
// am done" and every waiter re-read at once. Redis implements it over
// pub/sub, with one subscription connection per store.

// watchSubscribeWait bounds how long WatchRelease waits for the store to
// confirm a subscription; past it the waiter proceeds and relies on polling.
const watchSubscribeWait = time.Second

// releaseChannel is the channel a release of key is announced on. Pub/sub
// channels are shared by all the databases of a server, so a store on a
// database other than 0 tags its channels with the database's number.
func (r *Redis) releaseChannel(key string) string { return r.channelTag + key + ":released" }

// channelTag is what releaseChannel puts before a key for c.
func channelTag(c redis.UniversalClient) string {
	if nc, ok := c.(*redis.Client); ok && nc.Options().DB != 0 {
		return "db" + strconv.Itoa(nc.Options().DB) + ":"
	}
	return ""
}

// WatchRelease implements ReleaseWatcher over pub/sub: one subscription
// connection per Redis, opened on the first watch and closed after the last.
func (r *Redis) WatchRelease(ctx context.Context, key string) (<-chan struct{}, func(), bool) {
	return r.hub.watch(ctx, r.c, r.releaseChannel(key))
}

// AnnounceRelease publishes key's release on its channel.
func (r *Redis) AnnounceRelease(ctx context.Context, key string) {
	_ = r.c.Publish(context.WithoutCancel(xcontext.OrBackground(ctx)), r.releaseChannel(key), "").Err()
}

// WatchRelease watches key under the prefix, when the store under it can.
func (p *Prefixed) WatchRelease(ctx context.Context, key string) (<-chan struct{}, func(), bool) {
	return WatchRelease(ctx, p.s, p.prefix+key)
}

// AnnounceRelease announces key's release under the prefix.
func (p *Prefixed) AnnounceRelease(ctx context.Context, key string) {
	AnnounceRelease(ctx, p.s, p.prefix+key)
}

// WatchRelease watches key on s when s is a ReleaseWatcher; ok is false
// when it is not, and the caller then polls only.
func WatchRelease(ctx context.Context, s Store, key string) (released <-chan struct{}, stop func(), ok bool) {
	if w, ok := s.(ReleaseWatcher); ok {
		return w.WatchRelease(ctx, key)
	}
	return nil, func() {}, false
}

// AnnounceRelease announces key's release on s when s is a ReleaseWatcher.
func AnnounceRelease(ctx context.Context, s Store, key string) {
	if w, ok := s.(ReleaseWatcher); ok {
		w.AnnounceRelease(ctx, key)
	}
}

// pubsubHub shares one go-redis PubSub among the watchers of one Redis and
// fans each message out to the watchers of its channel. The zero value is ready.
type pubsubHub struct {
	mu    sync.Mutex
	ps    *redis.PubSub
	chans map[string]*watchedChannel
}

// watchedChannel is one subscribed channel: its watchers, and ready, closed
// when the server confirms the subscription.
type watchedChannel struct {
	watchers map[chan struct{}]struct{}
	ready    chan struct{}
}

func (h *pubsubHub) watch(ctx context.Context, c redis.UniversalClient, channel string) (<-chan struct{}, func(), bool) {
	got := make(chan struct{}, 1)
	h.mu.Lock()
	wc := h.chans[channel]
	if wc == nil {
		wc = &watchedChannel{watchers: map[chan struct{}]struct{}{}, ready: make(chan struct{})}
		if h.chans == nil {
			h.chans = map[string]*watchedChannel{}
		}
		h.chans[channel] = wc
		if h.ps == nil {
			h.ps = c.Subscribe(context.WithoutCancel(xcontext.OrBackground(ctx)), channel)
			go h.deliver(h.ps, h.ps.ChannelWithSubscriptions())
		} else if err := h.ps.Subscribe(xcontext.OrBackground(ctx), channel); err != nil {
			closeOnce(wc.ready) // go-redis subscribes again when it reconnects
		}
	}
	wc.watchers[got] = struct{}{}
	h.mu.Unlock()
	stop := func() { h.unwatch(channel, wc, got) }

	t := time.NewTimer(watchSubscribeWait)
	defer t.Stop()
	select {
	case <-wc.ready:
	case <-t.C:
	case <-xcontext.OrBackground(ctx).Done():
	}
	return got, stop, true
}

func (h *pubsubHub) unwatch(channel string, wc *watchedChannel, got chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(wc.watchers, got)
	if len(wc.watchers) > 0 || h.chans[channel] != wc {
		return
	}
	delete(h.chans, channel)
	if len(h.chans) == 0 {
		_ = h.ps.Close() // ends deliver
		h.ps = nil
		return
	}
	_ = h.ps.Unsubscribe(context.Background(), channel)
}

// deliver runs until ps is closed, waking the watchers of each message's
// channel and marking subscriptions ready as the server confirms them.
func (h *pubsubHub) deliver(ps *redis.PubSub, msgs <-chan any) {
	for m := range msgs {
		h.mu.Lock()
		if h.ps == ps {
			switch m := m.(type) {
			case *redis.Subscription:
				if wc := h.chans[m.Channel]; wc != nil && m.Kind == "subscribe" {
					closeOnce(wc.ready)
				}
			case *redis.Message:
				if wc := h.chans[m.Channel]; wc != nil {
					for w := range wc.watchers {
						select {
						case w <- struct{}{}:
						default: // one wake-up pending is enough
						}
					}
				}
			}
		}
		h.mu.Unlock()
	}
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}
