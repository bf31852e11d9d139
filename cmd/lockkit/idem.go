package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
)

// idemRecord is what idem reports. It reads the record raw (type, size, TTL): the record format
// is internal to the adapters (being reworked in internal/exactlyonce), so the status says only
// whether a record is stored, or the work is in progress under the record's lock, or neither.
type idemRecord struct {
	Key    string            `json:"key"`
	Status string            `json:"status"` // stored, in_progress, none
	Type   string            `json:"type,omitempty"`
	TTLMS  int64             `json:"ttl_ms,omitempty"`
	Size   int64             `json:"size"`             // bytes of a string; fields of a hash
	Fields []string          `json:"fields,omitempty"` // a hash's field names
	Body   *string           `json:"body,omitempty"`   // --body: a string's value
	Hash   map[string]string `json:"hash,omitempty"`   // --body: a hash's fields and values
}

// cmdIdem reports the idempotency record PREFIX idem:{SCOPE/KEY} and whether its lock
// PREFIX{SCOPE/KEY} is held.
func cmdIdem(ctx context.Context, args []string, out io.Writer) error {
	var c conn
	fs := flag.NewFlagSet("idem", flag.ContinueOnError)
	c.register(fs, true)
	body := fs.Bool("body", false, "print the stored value (it may hold personal data)")
	pos, err := parse(fs, args, 2, 2)
	if err != nil {
		return err
	}
	locks, rdb, closeAll, err := c.open()
	if err != nil {
		return err
	}
	defer closeAll()
	name := pos[0] + "/" + pos[1]
	rec := idemRecord{Key: c.prefix + "idem:{" + name + "}", Status: "none"}
	typ, err := rdb.Type(ctx, rec.Key).Result()
	if err != nil {
		return err
	}
	if typ != "none" {
		rec.Status, rec.Type = "stored", typ
		if err := readRecord(ctx, rdb, &rec, *body); err != nil {
			return err
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
	if c.json {
		err = printJSON(out, rec)
	} else {
		err = printRecord(out, rec)
	}
	if err == nil && rec.Status == "none" {
		return errNotFound
	}
	return err
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
		if rec.Size, err = rdb.StrLen(ctx, rec.Key).Result(); err != nil {
			return err
		}
		if body {
			v, err := rdb.Get(ctx, rec.Key).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
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
		if rec.TTLMS > 0 {
			fmt.Fprintf(tw, "ttl\t%dms\n", rec.TTLMS)
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
