package main

import (
	"bytes"
	"flag"
	"testing"
)

func TestParseFlagsEnvTwins(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		envs    map[string]string
		want    int
		wantErr bool
	}{
		{"default", nil, nil, 7, false},
		{"env fills unset flag", nil, map[string]string{"SLUICE_MAX_CONNS": "9"}, 9, false},
		{"flag beats env", []string{"--max-conns", "3"}, map[string]string{"SLUICE_MAX_CONNS": "9"}, 3, false},
		{"bad env value is an error", nil, map[string]string{"SLUICE_MAX_CONNS": "nine"}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(&stderr)
			n := fs.Int("max-conns", 7, "")
			e := env{stderr: &stderr, getenv: func(k string) string { return tt.envs[k] }}
			err := parseFlags(fs, e, tt.args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				if !bytes.Contains(stderr.Bytes(), []byte("SLUICE_MAX_CONNS")) {
					t.Errorf("error output %q does not name the variable", stderr.String())
				}
				return
			}
			if *n != tt.want {
				t.Errorf("max-conns = %d, want %d", *n, tt.want)
			}
		})
	}
}
