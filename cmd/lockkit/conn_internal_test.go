package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		in, addr, err string
		tls           bool
		db            int
	}{
		{in: "localhost:6379", addr: "localhost:6379"},
		{in: "10.0.0.5:7000", addr: "10.0.0.5:7000"},
		{in: "[::1]:6379", addr: "[::1]:6379"},
		{in: "redis://h:6380/2", addr: "h:6380", db: 2},
		{in: "redis://user:pw@h:6379", addr: "h:6379"},
		{in: "rediss://h:6379", addr: "h:6379", tls: true},
		{in: "unix:///run/redis.sock", addr: "/run/redis.sock"},
		{in: "localhost:6379:x", err: `invalid --url "localhost:6379:x": ` + wantURL},
		{in: "localhost", err: `invalid --url "localhost": ` + wantURL},
		{in: "h:0", err: `invalid --url "h:0": ` + wantURL},
		{in: ":6379", err: `invalid --url ":6379": ` + wantURL},
		{in: "http://h:6379", err: `invalid --url "http://h:6379": ` + wantURL},
		{in: "redis://h:6379/x", err: `invalid --url "redis://h:6379/x": ` + wantURL},
		{in: "redis://u:secret@h:x", err: `invalid --url "redis://u:xxxxx@h:x": ` + wantURL},
		{in: "redis://u:sec ret@h:x", err: `invalid --url "redis://u:xxxxx@h:x": ` + wantURL},
	} {
		o, err := parseURL(tc.in)
		switch {
		case tc.err != "":
			if err == nil || err.Error() != tc.err {
				t.Errorf("parseURL(%q): %v, want %s", tc.in, err, tc.err)
			}
		case err != nil:
			t.Errorf("parseURL(%q): %v", tc.in, err)
		case o.Addr != tc.addr || (o.TLSConfig != nil) != tc.tls || o.DB != tc.db:
			t.Errorf("parseURL(%q): addr %s, TLS %v, db %d", tc.in, o.Addr, o.TLSConfig != nil, o.DB)
		}
	}
}

// Without --url or REDIS_URL the command says which server it uses; with either (or Sentinel) it
// says nothing. Nothing is dialled here: go-redis connects on the first command.
func TestClient_saysTheDefaultServer(t *testing.T) {
	for _, tc := range []struct {
		env  string
		c    conn
		note string
	}{
		{"", conn{}, "lockkit: no --url or REDIS_URL; using redis://127.0.0.1:6379\n"},
		{"", conn{cluster: true}, "lockkit: no --url or REDIS_URL; using redis://127.0.0.1:6379\n"},
		{"redis://10.0.0.5:6379", conn{}, ""},
		{"10.0.0.5:6379", conn{}, ""},
		{"", conn{urls: list{"h:1"}}, ""},
		{"", conn{sentinels: list{"s:26379"}, master: "m"}, ""},
	} {
		t.Setenv("REDIS_URL", tc.env)
		var note bytes.Buffer
		c := tc.c
		c.timeout = time.Second
		rdb, err := c.client(&note)
		if err != nil {
			t.Fatal(err)
		}
		_ = rdb.Close()
		if note.String() != tc.note {
			t.Errorf("REDIS_URL=%q %+v: said %q, want %q", tc.env, tc.c, note.String(), tc.note)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
		rest []string
		help bool
		err  string
	}{
		{args: []string{"ls"}, name: "ls", rest: nil},
		{args: []string{"--url", "h:1", "ls", "x", "--json"}, name: "ls", rest: []string{"--url", "h:1", "x", "--json"}},
		{args: []string{"--url=h:1", "--json", "inspect", "x"}, name: "inspect", rest: []string{"--url=h:1", "--json", "x"}},
		{args: []string{"-json", "--cluster", "--sentinel", "s:1", "ls"}, name: "ls", rest: []string{"-json", "--cluster", "--sentinel", "s:1"}},
		{args: []string{"--", "ls", "x"}, name: "ls", rest: []string{"x"}},
		{args: []string{"-h", "ls"}, name: "ls", help: true},
		{args: []string{"--help"}, help: true},
		{args: []string{"--url", "h:1"}, rest: []string{"--url", "h:1"}},
		{args: []string{"--force", "release", "x"}, err: "unknown flag --force before the command"},
		{args: []string{"--timeout"}, err: "flag --timeout needs an argument"},
	} {
		name, rest, help, err := split(tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("split(%q): %v, want %s", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || name != tc.name || !reflect.DeepEqual(rest, tc.rest) || help != tc.help {
			t.Errorf("split(%q) = %q %q %v %v, want %q %q %v", tc.args, name, rest, help, err, tc.name, tc.rest, tc.help)
		}
	}
}

func TestHint(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		err  error
		hint string // a prefix; "" for none
	}{
		{fmt.Errorf("redis inspect: %w", dial), "cannot reach T: "},
		{errors.New("NOPERM this user has no permissions to run the 'scan' command"), "the Redis user lacks a permission"},
		{errors.New("WRONGPASS invalid username-password pair"), "authenticate in the URL"},
		{errors.New("NOAUTH Authentication required."), "authenticate in the URL"},
		{errors.New("MOVED 3999 127.0.0.1:7001"), "the server is a Redis Cluster node: add --cluster"},
		{fmt.Errorf("x: %w", io.EOF), "the server at T closed the connection"},
		{errors.New("tls: first record does not look like a TLS handshake"), "the server does not speak TLS"},
		{errors.New("ERR unknown command"), ""},
	} {
		if got := hint(tc.err, "T"); !strings.HasPrefix(got, tc.hint) || (tc.hint == "") != (got == "") {
			t.Errorf("hint(%v) = %q, want %q…", tc.err, got, tc.hint)
		}
	}
}
