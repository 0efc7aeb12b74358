// Package errs holds the library's error sentinels that its internal packages
// return, and the few helpers that mark an error with one of them. The root
// package re-exports each sentinel under its public name (ErrStoreUnavailable
// is StoreUnavailable), so errors.Is holds across the boundary.
package errs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
)

var (
	// NotFound is what a store returns for a key that is absent or expired.
	NotFound = errors.New("oauthflow: key not found")
	// StoreUnavailable marks a failure of the store, never to be mistaken for
	// NotFound.
	StoreUnavailable = errors.New("oauthflow: store unavailable")
	// InvalidArgument marks a caller's bad input.
	InvalidArgument = errors.New("oauthflow: invalid argument")
	// CorruptRecord marks a stored record that cannot be read.
	CorruptRecord = errors.New("oauthflow: corrupt stored record")
)

// Store marks err as a store failure, never to be mistaken for "not found",
// unless the caller's own ctx has ended: then it is that context's error
// (errors.Is(err, context.Canceled) holds), never StoreUnavailable.
func Store(ctx context.Context, op string, err error) error {
	if ctx != nil && ctx.Err() != nil {
		if errors.Is(err, ctx.Err()) {
			return fmt.Errorf("oauthflow: %s: %w", op, err)
		}
		return fmt.Errorf("oauthflow: %s: %w: %w", op, ctx.Err(), err)
	}
	return fmt.Errorf("%w: %s: %w", StoreUnavailable, op, err)
}

// Invalid returns an error wrapping InvalidArgument with the formatted text.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{InvalidArgument}, args...)...)
}

// Recover turns a panic of what (code the library calls but does not own: a
// provider, a hook) into *err. Call it deferred.
func Recover(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("oauthflow: %s panicked: %v", what, r)
	}
}

// IsNil reports whether v is nil, or an interface holding a nil pointer, map,
// slice, func or channel.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Interface, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
