package oauthflow_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type panickyProvider struct{ fakeProvider }

func (*panickyProvider) ProviderID() string { panic("no ID") }

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := oauthflow.NewRegistry()
	var typedNil *fakeProvider
	for name, p := range map[string]oauthflow.Provider{
		"nil":           nil,
		"typed nil":     typedNil,
		"empty ID":      newFakeProvider(""),
		"ID with colon": newFakeProvider("a:b"),
		"ID too long":   newFakeProvider(fmt.Sprintf("%070d", 0)),
		"panicking ID":  &panickyProvider{},
	} {
		assert.ErrorIs(t, reg.Register(p), oauthflow.ErrInvalidArgument, name)
	}
	gh := newFakeProvider("github")
	require.NoError(t, reg.Register(gh))
	assert.ErrorIs(t, reg.Register(newFakeProvider("github")), oauthflow.ErrInvalidArgument, "duplicate")
	got, err := reg.Get("github")
	require.NoError(t, err)
	assert.Same(t, gh, got)
	assert.True(t, reg.Has("github"))
	assert.False(t, reg.Has("gitlab"))
	_, err = reg.Get("gitlab")
	assert.ErrorIs(t, err, oauthflow.ErrUnknownProvider)
	assert.Equal(t, []string{"github"}, reg.IDs())

	var zero oauthflow.Registry // the zero value works too
	require.NoError(t, zero.Register(newFakeProvider("x")))
	assert.True(t, zero.Has("x"))
}

func TestRegistryConcurrent(t *testing.T) {
	t.Parallel()
	reg := oauthflow.NewRegistry()
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(2)
		go func() { defer wg.Done(); assert.NoError(t, reg.Register(newFakeProvider(fmt.Sprint("p", i)))) }()
		go func() { defer wg.Done(); reg.Has(fmt.Sprint("p", i)); _, _ = reg.Get("p0") }()
	}
	wg.Wait()
	assert.Len(t, reg.IDs(), 100)
}
