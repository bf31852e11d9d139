package asynqlock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/hibiken/asynq"
)

// KeyFunc returns the key of a task: tasks with the same key never run at once. An empty key means
// the task needs no lock. An error fails the task (wrap asynq.SkipRetry in it if retrying cannot
// help). The lock is the key in the middleware's core namespace ("@asynq/" + key by default, see
// WithNamespace), so a key taken from a payload cannot name another component's lock; a key may
// hold up to 1024 bytes.
type KeyFunc func(ctx context.Context, t *asynq.Task) (string, error)

// ByType keys tasks by their type name: tasks of one type run one at a time.
func ByType() KeyFunc {
	return func(_ context.Context, t *asynq.Task) (string, error) { return t.Type(), nil }
}

// ByHeader keys tasks by the value of a task header (asynq.NewTaskWithHeaders). Tasks without the
// header, or with an empty value, run without a lock.
func ByHeader(name string) KeyFunc {
	return func(_ context.Context, t *asynq.Task) (string, error) { return t.Headers()[name], nil }
}

// ByJSONField keys tasks by a field of their JSON payload: field of the top-level object, or with
// nested names, the field found by following them through nested objects (ByJSONField("customer",
// "id") reads {"customer":{"id":...}}).
//
// A string field gives its value; a number or a boolean gives its JSON text as written (so 42 and
// 42.0 are different keys). A missing field, null or "" means no key: the task runs without a lock.
// A payload that is not a JSON object, or a field that is an object or an array, is an error that
// wraps asynq.SkipRetry, as retrying the same payload cannot help.
func ByJSONField(field string, nested ...string) KeyFunc {
	path := append([]string{field}, nested...)
	return func(_ context.Context, t *asynq.Task) (string, error) {
		k, err := jsonField(t.Payload(), path)
		if err != nil {
			return "", fmt.Errorf("payload of task %q: %w: %w", t.Type(), err, asynq.SkipRetry)
		}
		return k, nil
	}
}

// jsonField finds the key at path in a JSON document.
func jsonField(doc []byte, path []string) (string, error) {
	raw := json.RawMessage(doc)
	for i, name := range path {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(raw, &obj); err != nil {
			return "", fmt.Errorf("%s is not a JSON object: %w", pathString(path[:i]), err)
		}
		if obj == nil { // null
			return "", nil
		}
		v, ok := obj[name]
		if !ok {
			return "", nil
		}
		raw = v
	}
	raw = bytes.TrimSpace(raw)
	switch raw[0] { // json.Unmarshal checked that the value is valid and not empty
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case 'n':
		return "", nil
	case '{', '[':
		return "", fmt.Errorf("%s is an object or an array, not a key", pathString(path))
	default: // number, true, false
		return string(raw), nil
	}
}

func pathString(path []string) string {
	if len(path) == 0 {
		return "the payload"
	}
	s := "field"
	for _, p := range path {
		s += fmt.Sprintf(" %q", p)
	}
	return s
}
