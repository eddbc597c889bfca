package zksession

import (
	"reflect"
	"testing"
)

func TestParseEnsembleConfig(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []string
	}{
		{"client addresses", "server.1=127.0.0.1:2888:3888:participant;127.0.0.11:2181\nserver.2=127.0.0.1:2889:3889:participant;127.0.0.12:2181\nversion=100000000\n",
			[]string{"127.0.0.11:2181", "127.0.0.12:2181"}},
		{"wildcard client host takes the quorum host", "server.1=zk-0.zk-hs:2888:3888:participant;0.0.0.0:2181\nserver.2=zk-1.zk-hs:2888:3888;[::]:2181",
			[]string{"zk-0.zk-hs:2181", "zk-1.zk-hs:2181"}},
		{"port only", "server.3=zk-2.zk-hs:2888:3888:observer;2181", []string{"zk-2.zk-hs:2181"}},
		{"ipv6", "server.1=[fd00::1]:2888:3888:participant;[fd00::1]:2181", []string{"[fd00::1]:2181"}},
		{"no client address: nothing to follow", "server.1=127.0.0.1:2888:3888\nversion=1", nil},
		{"standalone: empty", "", nil},
		{"duplicates once", "server.1=a:1:2;b:3\nserver.2=a:1:2;b:3", []string{"b:3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseEnsembleConfig([]byte(tt.data)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseEnsembleConfig(%q) = %q, want %q", tt.data, got, tt.want)
			}
		})
	}
}
