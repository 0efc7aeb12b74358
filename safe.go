package oauthflow

import (
	"fmt"
	"reflect"
)

// isNil reports whether v is nil or an interface holding a nil pointer.
func isNil(v any) bool {
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

// recoverInto turns a panic in code we call (a provider, a hook) into an error,
// so no panic ever reaches a request. Use as: defer recoverInto(&err, "what").
func recoverInto(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("oauthflow: %s panicked: %v", what, r)
	}
}
