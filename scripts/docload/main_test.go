package main

import (
	"strings"
	"testing"

	"github.com/squeeze-kv/squeeze/bench"
	"github.com/squeeze-kv/squeeze/internal/testutil"
)

// TestRunWritesAndReadsTheDocument runs a bounded SET and GET load against a
// real Redis and checks what it stored and what it counted.
func TestRunWritesAndReadsTheDocument(t *testing.T) {
	r := testutil.StartRedis(t)
	for _, op := range []string{"set", "get"} {
		o := options{addr: r.Addr, op: op, size: 100_000, clients: 3, requests: 10, key: "doc:" + op, seed: 7}
		res, err := run(o)
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if res.Requests != 10 || res.Rate <= 0 || res.Seconds <= 0 {
			t.Errorf("%s: result %+v", op, res)
		}
		got, err := testutil.Do(r.Addr, "GET", "doc:"+op)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(bench.JSONDocument(7, 100_000)) {
			t.Errorf("%s: the key holds %d bytes, not the document", op, len(got))
		}
	}
}

// TestRoundTripReportsAWrongReply: a GET reply of other bytes, of another
// length, or an error reply fails with a clear error instead of counting.
func TestRoundTripReportsAWrongReply(t *testing.T) {
	r := testutil.StartRedis(t)
	doc := bench.JSONDocument(1, 1000)
	other := bench.JSONDocument(2, 1000)
	for _, kv := range [][2]string{{"other", string(other)}, {"short", "short"}, {"list", ""}} {
		if kv[0] == "list" {
			if _, err := testutil.Do(r.Addr, "RPUSH", "list", "x"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := testutil.Do(r.Addr, "SET", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ key, want string }{
		{"other", "other bytes"},
		{"short", "bulk of 5 bytes, want 1000"},
		{"list", "WRONGTYPE"},
	} {
		c, err := dial(r.Addr) // a failed reply leaves the connection mid-reply
		if err != nil {
			t.Fatal(err)
		}
		err = c.roundTrip(command("GET", tc.key), make([]byte, len(doc)+2), doc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("GET %s: err %v, want it to mention %q", tc.key, err, tc.want)
		}
		c.conn.Close()
	}
}

// TestParseFlagsRefusesBadInput covers each refusal with its message.
func TestParseFlagsRefusesBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--size", "huge"}, "--size"},
		{[]string{"--size", "10"}, "outside"},
		{[]string{"--op", "del"}, "neither set nor get"},
		{[]string{"--clients", "0"}, "--clients >= 1"},
		{[]string{"--clients", "4", "--requests", "2"}, "--requests >= --clients"},
	} {
		_, err := parseFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
	o, err := parseFlags([]string{"--size", "4.2MB", "--op", "set"})
	if err != nil || o.size != 4_200_000 || o.op != "set" {
		t.Errorf("4.2MB set: %+v, %v", o, err)
	}
}
