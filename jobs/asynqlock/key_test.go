package asynqlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/lockkit/lockkit/jobs/asynqlock"
)

func TestByType_ByHeader(t *testing.T) {
	ctx := context.Background()
	task := asynq.NewTaskWithHeaders("email:send", nil, map[string]string{"customer": "c-9"})
	if k, err := asynqlock.ByType()(ctx, task); k != "email:send" || err != nil {
		t.Errorf("ByType = %q, %v", k, err)
	}
	if k, err := asynqlock.ByHeader("customer")(ctx, task); k != "c-9" || err != nil {
		t.Errorf("ByHeader = %q, %v", k, err)
	}
	if k, err := asynqlock.ByHeader("tenant")(ctx, task); k != "" || err != nil {
		t.Errorf("ByHeader of a missing header = %q, %v; want no key", k, err)
	}
}

func TestByJSONField(t *testing.T) {
	for _, tc := range []struct {
		payload string
		path    []string
		want    string
		err     bool
	}{
		{`{"customer_id":"c-1","n":1}`, []string{"customer_id"}, "c-1", false},
		{`{"customer_id":"c\u002d1"}`, []string{"customer_id"}, "c-1", false},
		{`{"customer_id": 42 }`, []string{"customer_id"}, "42", false},
		{`{"customer_id":4.20e1}`, []string{"customer_id"}, "4.20e1", false},
		{`{"flag":true}`, []string{"flag"}, "true", false},
		{`{"customer":{"id":"c-2"}}`, []string{"customer", "id"}, "c-2", false},
		{`{"customer":{"name":"x"}}`, []string{"customer", "id"}, "", false},
		{`{"customer":null}`, []string{"customer", "id"}, "", false},
		{`{"customer_id":null}`, []string{"customer_id"}, "", false},
		{`{"customer_id":""}`, []string{"customer_id"}, "", false},
		{`{}`, []string{"customer_id"}, "", false},
		{`null`, []string{"customer_id"}, "", false},
		{``, []string{"customer_id"}, "", true},
		{`not json`, []string{"customer_id"}, "", true},
		{`[1,2]`, []string{"customer_id"}, "", true},
		{`{"customer_id":{"a":1}}`, []string{"customer_id"}, "", true},
		{`{"customer_id":[1]}`, []string{"customer_id"}, "", true},
		{`{"customer":"c-3"}`, []string{"customer", "id"}, "", true},
	} {
		f := asynqlock.ByJSONField(tc.path[0], tc.path[1:]...)
		k, err := f(context.Background(), asynq.NewTask("t", []byte(tc.payload)))
		if k != tc.want || (err != nil) != tc.err {
			t.Errorf("ByJSONField%q on %s = %q, %v; want %q, error %v", tc.path, tc.payload, k, err, tc.want, tc.err)
		}
		if err != nil && !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("error %v does not wrap asynq.SkipRetry", err)
		}
	}
}

// FuzzByJSONField checks that any payload gives a key or an error, never a panic, and that a string
// field always yields the string encoding/json decodes.
func FuzzByJSONField(f *testing.F) {
	for _, s := range []string{`{"k":"v"}`, `{"k":1}`, `{"k":{"k":"x"}}`, `{"k":null}`, `null`, ``, `{`, `{"k":"\ud800"}`,
		`{"k": [ ]}`, ` {"k" : "v" } `, `{"k":"a","k":"b"}`, `"str"`, `{"k":-0.0e+1}`} {
		f.Add([]byte(s))
	}
	key := asynqlock.ByJSONField("k")
	f.Fuzz(func(t *testing.T, payload []byte) {
		k, err := key(context.Background(), asynq.NewTask("t", payload))
		if err != nil {
			if k != "" || !errors.Is(err, asynq.SkipRetry) {
				t.Fatalf("key %q with error %v", k, err)
			}
			return
		}
		var doc map[string]any
		if json.Unmarshal(payload, &doc) != nil {
			t.Fatalf("key %q from a payload encoding/json rejects: %q", k, payload)
		}
		if s, ok := doc["k"].(string); ok && s != k {
			t.Fatalf("key %q, want the field's string %q", k, s)
		}
	})
}
