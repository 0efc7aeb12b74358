package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// Tool is an operation an agent or a workflow can call: a name, a description,
// a JSON Schema of its arguments, and a function. Arguments are checked against
// the schema before the call: unknown fields are refused, required ones enforced.
//
// A Tool encodes to JSON the way LLM tool APIs expect: its name, its
// description, and its schema as "parameters".
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Schema      Schema `json:"parameters"`
	call        func(ctx context.Context, tc ToolContext, args json.RawMessage) (any, error)
}

// ToolContext says on whose behalf a tool runs.
type ToolContext struct {
	UserID  string
	RunID   string   // the workflow run calling the tool, if any
	Session *Session // the sign-in being completed, once consumed (exchange_oauth_token)
	// Owner, for build_oauth_url, names the engine that will finish the
	// sign-in (one of [Config.SignInOwners]; "" for the module's own) and
	// RunID its workflow there.
	Owner string
}

// Schema is the subset of JSON Schema our tools use: an object of typed properties.
type Schema struct {
	Type                 string              `json:"type"`
	Properties           map[string]Property `json:"properties"`
	Required             []string            `json:"required,omitempty"`
	AdditionalProperties bool                `json:"additionalProperties"`
}

// Property describes one argument: "string", "integer", "boolean", or "array" of Items.
type Property struct {
	Type        string    `json:"type"`
	Description string    `json:"description,omitempty"`
	Items       *Property `json:"items,omitempty"`
}

// resultUnauthorized is what a tool returns when the user has no usable token:
// the signal a consumer workflow uses to launch the "oauth" sub-workflow.
var resultUnauthorized = json.RawMessage(`{"error":"unauthorized"}`)

// NewTool makes a tool whose arguments decode into A. When fn fails with an
// error wrapping ErrNoToken, the tool returns {"error":"unauthorized"} instead
// of failing: a consumer tool just reads its token with GetValidAccessToken and
// returns the error.
func NewTool[A any](name, description string, schema Schema, fn func(ctx context.Context, tc ToolContext, args A) (any, error)) *Tool {
	return &Tool{Name: name, Description: description, Schema: schema,
		call: func(ctx context.Context, tc ToolContext, raw json.RawMessage) (any, error) {
			var args A
			if err := strictDecode(raw, &args); err != nil {
				return nil, errs.Invalid("%s arguments: %w", name, err)
			}
			return fn(ctx, tc, args)
		}}
}

// Call validates args against the schema, runs the tool and returns its JSON result.
func (t *Tool) Call(ctx context.Context, tc ToolContext, args json.RawMessage) (res json.RawMessage, err error) {
	ctx = xcontext.OrBackground(ctx)
	if err := t.Schema.validate(args); err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	defer errs.Recover(&err, "tool "+t.Name)
	out, err := t.call(ctx, tc, args)
	if errors.Is(err, ErrNoToken) {
		return unauthorizedResult(err), nil
	}
	if err != nil {
		return nil, err
	}
	return marshalArg(out)
}

// validate checks that raw is an object matching the schema.
func (s Schema) validate(raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return errs.Invalid("arguments must be a JSON object")
	}
	for _, name := range sortedKeys(obj) {
		p, ok := s.Properties[name]
		if !ok && !s.AdditionalProperties {
			return errs.Invalid("unknown argument %q", name)
		}
		if ok {
			if err := p.check(obj[name]); err != nil {
				return errs.Invalid("argument %q: %w", name, err)
			}
		}
	}
	for _, name := range s.Required {
		if v, ok := obj[name]; !ok || string(v) == "null" {
			return errs.Invalid("missing required argument %q", name)
		}
	}
	return nil
}

func (p Property) check(raw json.RawMessage) error {
	if string(raw) == "null" {
		return nil // caught by Required when it matters
	}
	var ok bool
	switch p.Type {
	case "string":
		var v string
		ok = json.Unmarshal(raw, &v) == nil
	case "integer":
		var v int64
		ok = json.Unmarshal(raw, &v) == nil
	case "boolean":
		var v bool
		ok = json.Unmarshal(raw, &v) == nil
	case "array":
		return p.checkArray(raw)
	default:
		ok = true
	}
	if !ok {
		return fmt.Errorf("want %s", p.Type)
	}
	return nil
}

func (p Property) checkArray(raw json.RawMessage) error {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return errors.New("want array")
	}
	if p.Items == nil {
		return nil
	}
	for i, it := range items {
		if err := p.Items.check(it); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
	}
	return nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Unauthorized is a tool's answer when the user must sign in (again):
// {"error":"unauthorized"}, and when the grant lacks scopes, the provider,
// the missing scopes and the scopes a new sign-in should ask for.
type Unauthorized struct {
	Error         string   `json:"error"`
	Provider      string   `json:"provider,omitempty"`
	MissingScopes []string `json:"missingScopes,omitempty"`
	Scopes        []string `json:"scopes,omitempty"`
}

// UnauthorizedResult reads a tool result; ok is false unless it says unauthorized.
func UnauthorizedResult(result json.RawMessage) (u Unauthorized, ok bool) {
	if json.Unmarshal(result, &u) != nil || u.Error != "unauthorized" {
		return Unauthorized{}, false
	}
	return u, true
}

// unauthorizedResult is the tool result for err, an ErrNoToken.
func unauthorizedResult(err error) json.RawMessage {
	var se *ScopeError
	if !errors.As(err, &se) {
		return resultUnauthorized
	}
	b, _ := json.Marshal(Unauthorized{Error: "unauthorized", Provider: se.ProviderID, MissingScopes: se.Missing, Scopes: se.Scopes()})
	return b
}
