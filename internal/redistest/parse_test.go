package redistest

import (
	"maps"
	"testing"
)

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_set:calls=2,usec=10,usec_per_call=5.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=29,usec_per_call=29.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_EVALSHA:calls=7,usec=1\r\n"
	got, err := parseCommandStats(info)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"set": 2, "config|resetstat": 1, "evalsha": 7}
	if !maps.Equal(got, want) {
		t.Fatalf("parseCommandStats = %v; want %v", got, want)
	}
	if _, err := parseCommandStats("cmdstat_set:calls=x"); err == nil {
		t.Fatal("no error for a bad count")
	}
}

func TestParseClusterNodes(t *testing.T) {
	text := "07c37dfe 127.0.0.1:30004@31004,host replica e7d1eecc 0 1426238317239 4 connected\n" +
		"e7d1eecc 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 6000 [5461->-292f8b36]\n"
	nodes, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 {
		t.Fatalf("got %d nodes", len(nodes))
	}
	r, m := nodes[0], nodes[1]
	if !r.isReplica() || r.masterID != "e7d1eecc" || r.port != 30004 || !r.connected || len(r.slots) != 0 {
		t.Fatalf("replica parsed as %+v", r)
	}
	if !m.isMaster() || m.masterID != "" || m.port != 30001 || myself(nodes) != &nodes[1] {
		t.Fatalf("master parsed as %+v", m)
	}
	if want := []slotRange{{0, 5460}, {6000, 6000}}; len(m.slots) != 2 || m.slots[0] != want[0] || m.slots[1] != want[1] {
		t.Fatalf("slots = %v; want %v", m.slots, want)
	}
	if _, err := parseClusterNodes("short line\n"); err == nil {
		t.Fatal("no error for a short line")
	}
}

func TestClientCredentials(t *testing.T) {
	for _, tc := range []struct {
		opts       []Option
		user, pass string
	}{
		{nil, "", ""},
		{[]Option{WithPassword("pw")}, "", "pw"},
		{[]Option{WithACL("user default off", "user app on >s ~x:* +@all")}, "app", "s"},
		{[]Option{WithPassword("pw"), WithACL("user app on nopass ~* +@all")}, "", "pw"},
	} {
		user, pass := newConfig(tc.opts).clientCredentials()
		if user != tc.user || pass != tc.pass {
			t.Errorf("clientCredentials = %q, %q; want %q, %q", user, pass, tc.user, tc.pass)
		}
	}
}
