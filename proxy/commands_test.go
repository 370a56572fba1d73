package proxy

import (
	"testing"

	"github.com/squeeze-kv/squeeze/internal/rediscmd"
)

// TestCommands_FromTable: every command of the table has the proxy's
// entry; Other commands count and behave as unknown ones (named OTHER, id
// 0, replies searched for frames) but keep their facts; the others are
// numbered 1..commandCount, once each.
func TestCommands_FromTable(t *testing.T) {
	seen := map[int32]string{}
	for _, spec := range rediscmd.All() {
		info := lookup([]byte(spec.Name))
		if info == unknownCmd || info.spec != spec {
			t.Fatalf("%s: no entry of its own", spec.Name)
		}
		if spec.Has(rediscmd.Other) {
			if info.name != "OTHER" || info.id != 0 || info.reply != shapeSniff || info.flags != spec.Flags {
				t.Errorf("%s: %+v, want an unknown command's entry with the table's facts", spec.Name, info)
			}
			continue
		}
		if info.name != spec.Name || info.vals != spec.Values || info.reply != shape(spec.Reply) || info.flags != spec.Flags {
			t.Errorf("%s: %+v does not carry the table's facts", spec.Name, info)
		}
		if info.id < 1 || int(info.id) > commandCount || seen[info.id] != "" {
			t.Errorf("%s: id %d (%s has it too, %d commands)", spec.Name, info.id, seen[info.id], commandCount)
		}
		seen[info.id] = spec.Name
	}
	if len(seen) != commandCount {
		t.Errorf("%d numbered commands, commandCount %d", len(seen), commandCount)
	}
}

// TestCommands_Lookup: any case finds the entry, without allocating;
// unknown and over-long names find unknownCmd.
func TestCommands_Lookup(t *testing.T) {
	for name, want := range map[string]string{"get": "GET", "GeT": "GET", "del": "OTHER", "nosuch": "OTHER", "averyveryverylongcommandname": "OTHER"} {
		if got := lookup([]byte(name)).name; got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	if lookup([]byte("nosuch")) != unknownCmd {
		t.Error("an unknown command is not unknownCmd")
	}
	name := []byte("hgetall")
	if n := testing.AllocsPerRun(100, func() { lookup(name) }); n != 0 {
		t.Errorf("lookup: %v allocations", n)
	}
}

// TestCommands_Conditional: SET and DELEX with a condition on the stored
// value are served as inspect commands, counted as themselves.
func TestCommands_Conditional(t *testing.T) {
	for _, tt := range []struct {
		cmd  []string
		want *cmdInfo
	}{
		{[]string{"SET", "k", "v"}, setCmd},
		{[]string{"SET", "k", "v", "IFEQ", "old"}, setIf},
		{[]string{"set", "k", "IFEQ"}, setCmd}, // IFEQ is the value
		{[]string{"DELEX", "k", "ifdne", "abc"}, delexIf},
		{[]string{"DELEX", "k"}, delexCmd},
		{[]string{"GET", "k"}, lookup([]byte("GET"))},
	} {
		args := argv(tt.cmd...)
		got := conditional(lookup(args[0]), args)
		if got != tt.want {
			t.Errorf("%q: served as %s (inspect %v), want %s", tt.cmd, got.name, got.flags&rediscmd.Inspect != 0, tt.want.name)
		}
	}
	if setIf.id != setCmd.id || setIf.flags&rediscmd.Inspect == 0 || !setIf.compare {
		t.Errorf("SET IFEQ: %+v", setIf)
	}
}
