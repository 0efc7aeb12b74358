package oauthflow

import (
	"context"
	"time"
)

func ctxOrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// sleepCtx waits d, or less if ctx ends first (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// valuesFrom is ctx, whose deadline and cancellation it keeps, with the values
// of values behind ctx's own: how a request's context carries the trace IDs of
// the context a Client or TokenSource was made with, but never its lifetime.
type valuesFrom struct {
	context.Context
	values context.Context
}

func (c valuesFrom) Value(key any) any {
	if v := c.Context.Value(key); v != nil {
		return v
	}
	return c.values.Value(key)
}

// valuesOnly keeps ctx's values and drops its deadline and cancellation.
func valuesOnly(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return context.WithoutCancel(ctx)
}

func withValuesOf(ctx, values context.Context) context.Context {
	if values == nil {
		return ctx
	}
	return valuesFrom{Context: ctx, values: values}
}
