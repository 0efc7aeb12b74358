// Package xcontext holds the context helpers the library shares: a nil
// context read as Background, a sleep that a context ends, and a context that
// keeps a caller's values but not its cancellation.
package xcontext

import (
	"context"
	"time"
)

// OrBackground returns ctx, or context.Background when ctx is nil.
func OrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// Sleep waits d or until ctx ends, and returns ctx's error in the second case.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

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

// ValuesOnly keeps ctx's values and drops its deadline and cancellation; a
// nil ctx gives Background.
func ValuesOnly(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return context.WithoutCancel(ctx)
}

// WithValuesOf returns ctx, whose deadline and cancellation rule, answering
// Value from values where ctx has none.
func WithValuesOf(ctx, values context.Context) context.Context {
	if values == nil {
		return ctx
	}
	return valuesFrom{Context: ctx, values: values}
}
