package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/lockkit/lockkit/core"
	"github.com/lockkit/lockkit/internal/exactlyonce"
	"github.com/redis/go-redis/v9"
)

// idemRecord is what idem reports: whether an outcome is stored (and what kind, how old), the work
// is in progress under the record's lock, or neither. A record of the exactly-once layer
// (internal/exactlyonce: httpmw, grpcmw, cronlock) is decoded; anything else is shown raw.
type idemRecord struct {
	Key    string            `json:"key"`
	Status string            `json:"status"` // stored, in_progress, none
	Type   string            `json:"type,omitempty"`
	Kind   string            `json:"kind,omitempty"`   // a layer record's kind: http, grpc, grpc-status, tick
	AgeMS  int64             `json:"age_ms,omitempty"` // retention − TTL: how long ago it was stored
	TTLMS  int64             `json:"ttl_ms,omitempty"`
	Size   int64             `json:"size"`             // bytes of a string; fields of a hash
	Fields []string          `json:"fields,omitempty"` // a hash's field names
	Body   *string           `json:"body,omitempty"`   // --body: a string's value
	Hash   map[string]string `json:"hash,omitempty"`   // --body: a hash's fields and values
}

func setupIdem(fs *flag.FlagSet) runner {
	body := fs.Bool("body", false, "print the stored value (it may hold personal data)")
	var retention time.Duration
	durationVar(fs, &retention, "retention", 24*time.Hour, "the adapter's retention, to tell a record's age from its TTL")
	var req httpRequest
	req.register(fs)
	return func(ctx context.Context, e *env, args []string) error {
		return cmdIdem(ctx, e, args, *body, retention, &req)
	}
}

// cmdIdem reports the idempotency record PREFIX idem:{NAME} and whether its lock NAME is held.
// NAME is SCOPE/KEY; a SCOPE without '@' is a namespace (http-idem, grpc-idem, cron...), as the
// adapters name their records' locks (@http-idem/HASH: `lockkit ls '@http-idem/*'` lists them).
// With --method and --route, KEY is the client's Idempotency-Key and HASH is computed from it as
// httpmw does.
func cmdIdem(ctx context.Context, e *env, pos []string, body bool, retention time.Duration, req *httpRequest) error {
	key := pos[1]
	if req.given() {
		if pos[0] != "http-idem" {
			return usageError{error: fmt.Errorf("--method, --route, --header, --cert and --principal describe an HTTP request: they need the scope http-idem, not %q", pos[0])}
		}
		hash, err := req.hash(key)
		if err != nil {
			return usageError{error: err}
		}
		key = hash
	}
	locks, rdb, closeAll, err := e.open()
	if err != nil {
		return err
	}
	defer closeAll()
	name := pos[0] + "/" + key
	if !strings.HasPrefix(pos[0], "@") && isNamespace(pos[0]) {
		name = core.Namespaced(pos[0], key)
	}
	rec := idemRecord{Key: e.prefix + "idem:{" + name + "}", Status: "none"}
	typ, err := rdb.Type(ctx, rec.Key).Result()
	if err != nil {
		return err
	}
	if typ != "none" {
		rec.Status, rec.Type = "stored", typ
		if err := readRecord(ctx, rdb, &rec, body); err != nil {
			return err
		}
		if rec.TTLMS > 0 && retention > 0 {
			rec.AgeMS = max(retention.Milliseconds()-rec.TTLMS, 0)
		}
	} else {
		info, err := locks.Inspect(ctx, name)
		if err != nil {
			return err
		}
		if info.Held {
			rec.Status = "in_progress"
		}
	}
	if e.json {
		err = printJSON(e.out, rec)
	} else {
		err = printRecord(e.out, rec)
	}
	if err == nil && rec.Status == "none" {
		if !req.given() && (pos[0] == "http-idem" || pos[0] == "grpc-idem") && !isHash(key) {
			fmt.Fprintf(e.errOut, "lockkit idem: %q is not a record's hash (64 hex digits): the adapters hash the scope "+
				"with the client's key; for httpmw, give the request: lockkit idem http-idem %s --method POST --route /orders "+
				"[--header 'Authorization: …'] (see \"lockkit help idem\")\n", key, key)
		}
		return errNotFound
	}
	return err
}

// isHash reports whether s is 64 lower-case hex digits, the name the adapters give a record.
func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func readRecord(ctx context.Context, rdb redis.UniversalClient, rec *idemRecord, body bool) error {
	ttl, err := rdb.PTTL(ctx, rec.Key).Result()
	if err != nil {
		return err
	}
	if ttl > 0 {
		rec.TTLMS = ttl.Milliseconds()
	}
	switch rec.Type {
	case "string":
		v, err := rdb.Get(ctx, rec.Key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		rec.Size = int64(len(v))
		if r, err := exactlyonce.Decode(v); err == nil {
			rec.Kind = kindName(r.Kind)
			v = r.Payload
		}
		if body {
			rec.Body = &v
		}
	case "hash":
		m, err := rdb.HGetAll(ctx, rec.Key).Result()
		if err != nil {
			return err
		}
		rec.Size = int64(len(m))
		for f := range m {
			rec.Fields = append(rec.Fields, f)
		}
		sort.Strings(rec.Fields)
		if body {
			rec.Hash = m
		}
	}
	return nil
}

func printRecord(out io.Writer, rec idemRecord) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "key\t%s\n", rec.Key)
	fmt.Fprintf(tw, "status\t%s\n", rec.Status)
	if rec.Status == "stored" {
		fmt.Fprintf(tw, "type\t%s\n", rec.Type)
		if rec.Kind != "" {
			fmt.Fprintf(tw, "kind\t%s\n", rec.Kind)
		}
		if rec.AgeMS > 0 {
			fmt.Fprintf(tw, "age\t%s (retention − TTL)\n", dur(time.Duration(rec.AgeMS)*time.Millisecond))
		}
		if rec.TTLMS > 0 {
			fmt.Fprintf(tw, "ttl\t%s\n", dur(time.Duration(rec.TTLMS)*time.Millisecond))
		}
		if rec.Type == "hash" {
			fmt.Fprintf(tw, "fields\t%d %v\n", rec.Size, rec.Fields)
		} else {
			fmt.Fprintf(tw, "size\t%d bytes\n", rec.Size)
		}
		if rec.Body != nil {
			fmt.Fprintf(tw, "body\t%s\n", printable(*rec.Body))
		}
		for _, f := range rec.Fields {
			if v, ok := rec.Hash[f]; ok {
				fmt.Fprintf(tw, "  %s\t%s\n", printable(f), printable(v))
			}
		}
	}
	return tw.Flush()
}

// printable quotes a value that is not valid text.
func printable(s string) string {
	if utf8.ValidString(s) && strconv.Quote(s) == `"`+s+`"` {
		return s
	}
	return strconv.Quote(s)
}

// kindName names a layer record's kind byte (see docs/keys.md, "Exactly-once records").
func kindName(k byte) string {
	switch k {
	case 'h':
		return "http"
	case 'r':
		return "grpc"
	case 's':
		return "grpc-status"
	case 'm':
		return "tick"
	}
	return string(k)
}

// isNamespace reports whether s can name a namespace (core.InNamespace): a-z, 0-9 and '-'.
func isNamespace(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return s != ""
}
