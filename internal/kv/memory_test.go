package kv

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A write that lands while a reader decodes the old value must not leave the
// old value's decoding attached to the new one.
func TestGetMemoDropsADecodingOvertakenByAWrite(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(nil)
	key := []byte("k")
	require.NoError(t, m.Set(ctx, "k", []byte("old"), 0))
	decodes := 0
	decode := func(b []byte) any { decodes++; return string(b) }
	overtaken := func(b []byte) any {
		require.NoError(t, m.Set(ctx, "k", []byte("new"), 0)) // lands between the read and the memo
		return decode(b)
	}
	_, memo, ok := m.GetMemo(key, overtaken)
	require.True(t, ok)
	assert.Equal(t, "old", memo, "the reader gets what it read")

	v, memo, ok := m.GetMemo(key, decode)
	require.True(t, ok)
	assert.Equal(t, "new", string(v))
	assert.Equal(t, "new", memo, "the new value is decoded afresh, not served the old value's decoding")
	_, memo, _ = m.GetMemo(key, decode)
	assert.Equal(t, "new", memo)
	assert.Equal(t, 2, decodes, "each stored value is decoded once")
}

// Sign-ins that expire give their memory back: the sweep that the worker's
// Claim runs drops them and rebuilds the map at the size of what is left.
func TestMemoryGivesBackWhatExpires(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	m := NewMemory(func() time.Time { return now })
	require.NoError(t, m.Set(ctx, "kept", []byte("v"), 0))
	for i := range 5000 {
		require.NoError(t, m.Set(ctx, "oauth:session:"+strconv.Itoa(i), []byte("session"), 10*time.Minute))
	}
	m.mu.Lock()
	before := m.m
	m.mu.Unlock()
	now = now.Add(10 * time.Minute)
	_, err := m.Claim(ctx, "oauth:sys:due", now, time.Minute, 10)
	require.NoError(t, err)
	assert.Equal(t, 1, m.Len(), "only the entry without a TTL is left")
	m.mu.Lock()
	defer m.mu.Unlock()
	assert.NotEqual(t, reflect.ValueOf(before).UnsafePointer(), reflect.ValueOf(m.m).UnsafePointer(),
		"the map that held 5,001 entries was replaced by one of the size of what is left")
	assert.Equal(t, 1, m.peak)
}
