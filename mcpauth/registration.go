package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/oauthflow/oauthflow"
)

// registration is a stored dynamic registration and its provenance: where
// and through what it was made, for which server's discovery, and when.
type registration struct {
	Client   Client    `json:"client"`
	Issuer   string    `json:"issuer"`                // the verified issuer it was made at
	Endpoint string    `json:"registration_endpoint"` // the endpoint that made it
	Server   string    `json:"server"`                // the resource whose discovery led to it
	At       time.Time `json:"registered_at"`
	Expires  time.Time `json:"expires_at,omitzero"` // the secret's end, as the server said; zero: never
}

// fits reports whether reg may serve d's server at now: made at d's
// verified issuer through its current registration endpoint, and not
// about to expire.
func (reg registration) fits(d *Discovered, now time.Time) bool {
	return reg.Client.ID != "" && reg.Issuer == verifiedIssuer(d) && reg.Endpoint == d.AS.RegistrationEndpoint &&
		(reg.Expires.IsZero() || now.Before(reg.Expires.Add(-expiryMargin)))
}

// storedRegistration reads the registration under key, and its stored form
// (for a compare-and-delete). A record that does not open or parse is
// absent (registered again), except one sealed under a key the ring lacks:
// that is a configuration fault, reported rather than overwritten.
func (c *Connector) storedRegistration(ctx context.Context, key string) (reg registration, raw []byte, ok bool, err error) {
	raw, err = c.kv.Get(ctx, key)
	if errors.Is(err, oauthflow.ErrNotFound) {
		return registration{}, nil, false, nil
	}
	if err != nil {
		return registration{}, nil, false, err
	}
	plain, err := c.ring.Open(raw, key)
	if errors.Is(err, oauthflow.ErrUnknownKey) {
		return registration{}, nil, false, err
	}
	if err != nil || json.Unmarshal(plain, &reg) != nil || reg.Client.ID == "" {
		return registration{}, raw, false, nil
	}
	return reg, raw, true, nil
}

// storeRegistration writes reg under key, sealed with the module's key
// ring. It lives as long as an unused server record: a grant issued to it
// keeps it longer (keepRegistration).
func (c *Connector) storeRegistration(ctx context.Context, key string, reg registration) error {
	sealed, err := c.sealRegistration(key, reg)
	if err != nil {
		return err
	}
	return c.kv.Set(ctx, key, sealed, serverTTL)
}

// sealRegistration is the stored form of reg under key.
func (c *Connector) sealRegistration(key string, reg registration) ([]byte, error) {
	b, err := json.Marshal(reg)
	if err != nil {
		return nil, err
	}
	return c.ring.Seal(b, key), nil
}

// keepRegistration has d's dynamic registration live nameTTL from now: a
// grant was issued to reg, the registration in use. With restore, one that
// expired unused meanwhile is stored again, unless another was stored
// since, so that every instance refreshes the grant with the client it was
// issued to. Without it (the caller kept it too recently for it to have
// expired), an absent registration was deleted, and stays so. The error is
// the store's.
func (c *Connector) keepRegistration(ctx context.Context, d *Discovered, reg registration, restore bool) error {
	key := registrationKey(d)
	raw, err := c.kv.Get(ctx, key)
	switch {
	case err == nil:
		_, err = c.kv.CompareAndExpire(ctx, key, raw, nameTTL)
		return err
	case !errors.Is(err, oauthflow.ErrNotFound):
		return err
	case !restore || reg.Client.ID == "":
		return nil
	}
	sealed, err := c.sealRegistration(key, reg)
	if err != nil {
		return err
	}
	_, err = c.kv.SetNX(ctx, key, sealed, nameTTL)
	return err
}

// forgetRegistration drops the registration of d's server if it is still
// the client refused (the server answered invalid_client to it at its token
// endpoint), so that the next use registers again.
func (c *Connector) forgetRegistration(ctx context.Context, d *Discovered, refused string) error {
	key := registrationKey(d)
	reg, raw, ok, err := c.storedRegistration(ctx, key)
	if err != nil || !ok || reg.Client.ID != refused {
		return err
	}
	_, err = c.kv.CompareAndDelete(ctx, key, raw)
	return err
}
