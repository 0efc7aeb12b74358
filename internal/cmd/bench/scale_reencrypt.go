package main

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/redis/go-redis/v9"
)

// reencryptCost is the time to seal all N records under a new key: the
// library's Reencrypt, and by hand.
type reencryptCost struct {
	rewritten   int
	lib, byHand time.Duration
}

// reencrypt moves every record from the first key to the second with the
// library's Reencrypt, then from the second to the third by hand.
func (s *scaler) reencrypt(ctx context.Context, mod *oauthflow.Module, n int) (reencryptCost, error) {
	ks := scaleKeys()
	ring, err := oauthflow.ParseKeyRing(ks[1].String() + "," + ks[0].String())
	if err != nil {
		return reencryptCost{}, err
	}
	start := time.Now()
	p, err := oauthflow.Reencrypt(ctx, mod.KV, ring, oauthflow.ReencryptOptions{})
	r := reencryptCost{rewritten: p.Rewritten, lib: time.Since(start)}
	if err == nil && p.Rewritten != n {
		err = fmt.Errorf("Reencrypt rewrote %d records of %d: %+v", p.Rewritten, n, p)
	}
	if err != nil {
		return r, err
	}
	start = time.Now()
	done, err := s.resealByHand(ctx, ks[1], ks[2])
	r.byHand = time.Since(start)
	if err == nil && done != n {
		err = fmt.Errorf("the by-hand walk resealed %d records of %d", done, n)
	}
	return r, err
}

// reencryptOnly is -scale-only reencrypt: at each N, the connections stored
// in the main configuration, re-encrypted by the library and by hand, and
// the two times printed; it leaves nothing behind.
func (s *scaler) reencryptOnly(ctx context.Context) error {
	for _, n := range s.e.opts.scaleNs {
		r, err := s.reencryptAt(ctx, n)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		fmt.Printf("N=%d: %d records rewritten; Reencrypt %s, by hand, batched %s: %.2fx\n", n, r.rewritten,
			r.lib.Round(time.Millisecond), r.byHand.Round(time.Millisecond), r.lib.Seconds()/r.byHand.Seconds())
	}
	return nil
}

// reencryptAt stores n connections in the main configuration and takes the
// re-encryption figure on them.
func (s *scaler) reencryptAt(ctx context.Context, n int) (_ reencryptCost, err error) {
	defer func() {
		if cerr := clearPrefix(ctx, s.e.rdb, s.e.prefix); err == nil {
			err = cerr
		}
	}()
	mod, err := scaleModule(ctx, oauthflow.NewRedisKV(s.e.rdb), s.e.prefix, scaleConfig{encrypted: true, ahead: true}, s.reg)
	if err != nil {
		return reencryptCost{}, err
	}
	defer func() { _ = mod.Close() }()
	if _, _, err := storeAll(ctx, mod, n); err != nil {
		return reencryptCost{}, err
	}
	return s.reencrypt(ctx, mod, n)
}

// resealByHand is Reencrypt's limit: the same walk (SCAN) and the same
// AES-256-GCM work on each record, with one MGET and one pipeline of SETs
// (KEEPTTL) per batch of 500 keys instead of a read, a TTL and a
// compare-and-swap for each record. It is not safe beside writers: the floor,
// not an alternative.
func (s *scaler) resealByHand(ctx context.Context, from, to scaleKey) (int, error) {
	open, seal := gcmOf(from.Key), gcmOf(to.Key)
	done := 0
	var cursor uint64
	for {
		keys, next, err := s.e.rdb.Scan(ctx, cursor, s.e.prefix+"oauth:*", reencryptBatch).Result()
		if err != nil {
			return done, err
		}
		n, err := s.resealBatch(ctx, tokenKeys(keys, s.e.prefix), open, seal, to.ID)
		if done += n; err != nil {
			return done, err
		}
		if cursor = next; cursor == 0 {
			return done, nil
		}
	}
}

const reencryptBatch = 500

func tokenKeys(keys []string, prefix string) []string {
	var out []string
	for _, k := range keys {
		if kindOf(strings.TrimPrefix(k, prefix)) == "token" {
			out = append(out, k)
		}
	}
	return out
}

func (s *scaler) resealBatch(ctx context.Context, keys []string, open, seal cipher.AEAD, toID string) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	vals, err := s.e.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return 0, err
	}
	pipe := s.e.rdb.Pipeline()
	for i, key := range keys {
		v, _ := vals[i].(string)
		name := strings.TrimPrefix(key, s.e.prefix)
		plain, err := openSealed(open, v, name)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		pipe.SetArgs(ctx, key, sealWith(seal, toID, plain, name), redis.SetArgs{KeepTTL: true})
	}
	_, err = pipe.Exec(ctx)
	return len(keys), err
}

func gcmOf(key []byte) cipher.AEAD {
	block, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // the mode's own 32-byte keys
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

// openSealed opens a record of the documented raw sealed form
// "enc2:{keyID}:{nonce ‖ ciphertext ‖ tag}", bound to its name.
func openSealed(aead cipher.AEAD, v, name string) ([]byte, error) {
	mark, rest, _ := strings.Cut(v, ":")
	_, raw, ok := strings.Cut(rest, ":")
	if mark != "enc2" || !ok {
		return nil, errors.New("not a sealed record")
	}
	if len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, errors.New("a malformed sealed record")
	}
	return aead.Open(nil, []byte(raw[:aead.NonceSize()]), []byte(raw[aead.NonceSize():]), []byte(name))
}

func sealWith(aead cipher.AEAD, keyID string, plain []byte, name string) []byte {
	head := "enc2:" + keyID + ":"
	out := make([]byte, len(head)+aead.NonceSize(), len(head)+aead.NonceSize()+len(plain)+aead.Overhead())
	copy(out, head)
	nonce := out[len(head):]
	_, _ = rand.Read(nonce)
	return aead.Seal(out, nonce, plain, []byte(name))
}
