package providers

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Where the plain decode takes a token answer, it reads it exactly as the
// flex decode does.
func FuzzPlainTokenResponse(f *testing.F) {
	for _, seed := range []string{
		`{"access_token":"a","token_type":"bearer","expires_in":3600,"refresh_token":"r","scope":"repo user"}`,
		`{"access_token":"a","expires_in":-5,"scope":null,"ok":true}`,
		`{"access_token":"a","expires_in":"3600","scope":["a","b"]}`,
		`{"error":"invalid_grant","error_description":"bad","error_uri":"https://x"}`,
		`{"error":{"code":1},"ok":false}`,
		`{"access_token":"a","expires_in":3600.0}`,
		`{"access_token":"a","expires_in":1e3,"error":false}`,
		`{"ACCESS_TOKEN":"a","Expires_In":12}`,
		`{"access_token":"a","access_token":"b"}`,
		`{"access_token":"a","authorization_details":[{"type":"x","n":1}]}`,
		`{"access_token":"a","authorization_details":"x","expires_in":"1"}`,
		`null`, `[]`, `{"access_token":"\u00e9\n"}`, `{`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		plain, ok := decodePlainTokenResponse(body)
		if !ok {
			return
		}
		var flex tokenResponse
		if err := json.Unmarshal(body, &flex); err != nil {
			t.Fatalf("the plain decode took %q, the flex decode refused it: %v", body, err)
		}
		flex.raw = body
		if !reflect.DeepEqual(*plain, flex) {
			t.Fatalf("%q: plain %+v, flex %+v", body, *plain, flex)
		}
	})
}
