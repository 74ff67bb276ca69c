package consensus

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// votes builds answers from a compact spec: y = yes (observed a day),
// n = no, s = stand aside, r = young yes (observed a minute).
func votes(spec string) []Answer {
	var out []Answer
	for _, c := range spec {
		a := Answer{Notary: string(c)}
		switch c {
		case 'y':
			a.Vote, a.Observed = Yes, 24*time.Hour
		case 'r':
			a.Vote, a.Observed = Yes, time.Minute
		case 'n':
			a.Vote = No
		case 's':
			a.Vote = StandAside
		}
		out = append(out, a)
	}
	return out
}

func TestDecide(t *testing.T) {
	const T, U, I = Trusted, Untrusted, Inconclusive
	tests := []struct {
		policy               string
		minDur               time.Duration
		unreachableIsFailure bool
		votes                string
		want                 Result
	}{
		// majority: more than half of those who voted.
		{"majority", 0, false, "yyy", T},
		{"majority", 0, false, "yyn", T},
		{"majority", 0, false, "ynn", U},
		{"majority", 0, false, "yn", U}, // a tie is not a majority
		{"majority", 0, false, "nnn", U},
		{"majority", 0, false, "yss", T}, // stand-asides do not vote
		{"majority", 0, false, "nss", U},
		{"majority", 0, false, "sss", I}, // nobody voted
		{"majority", 0, false, "", I},
		{"majority", 0, true, "yss", U}, // unless unreachable is failure
		{"majority", 0, true, "yys", T},
		{"majority", 0, true, "sss", U},
		// consensus: all who voted agree.
		{"consensus", 0, false, "yyy", T},
		{"consensus", 0, false, "yyn", U},
		{"consensus", 0, false, "yys", T},
		{"consensus", 0, true, "yys", U},
		{"consensus", 0, false, "sss", I},
		// minority: one yes is enough.
		{"minority", 0, false, "ynn", T},
		{"minority", 0, false, "nnn", U},
		{"minority", 0, false, "nss", U},
		{"minority", 0, false, "ss", I},
		// quorum over configured notaries (Perspectives).
		{"quorum:0.75", 0, false, "yyyy", T},
		{"quorum:0.75", 0, false, "yyyn", T}, // 3 of 4 >= ceil(3.0)
		{"quorum:0.75", 0, false, "yynn", U},
		{"quorum:0.75", 0, false, "yyys", T},
		{"quorum:0.75", 0, false, "yyss", I}, // could have made it had the absent said yes
		{"quorum:0.75", 0, false, "ynss", I}, // 3 possible if both absent said yes
		{"quorum:0.75", 0, false, "yns", U},  // cannot: needs 3 of 3, one said no
		{"quorum:0.75", 0, true, "yyss", U},
		{"quorum:0.5", 0, false, "yss", I},
		{"quorum:0.5", 0, false, "yys", T},
		{"quorum:1", 0, false, "yyy", T},
		{"quorum:1", 0, false, "yys", I},
		{"quorum:0.1", 0, false, "ynnnn", T},
		// minimum observation duration.
		{"majority", time.Hour, false, "yyy", T},
		{"majority", time.Hour, false, "rrr", I}, // too young, not an attack
		{"majority", time.Hour, false, "yrr", I},
		{"majority", time.Hour, false, "yyr", T},
		{"majority", time.Hour, false, "rnn", U},
		{"consensus", time.Hour, false, "yyr", I},
		{"minority", time.Hour, false, "rnn", I},
		{"minority", time.Hour, false, "ynn", T},
		{"quorum:0.75", time.Hour, false, "yyyr", T},
		{"quorum:0.75", time.Hour, false, "yyrr", I},
		{"quorum:0.75", time.Hour, false, "yrnn", U},
		{"quorum:0.75", 0, false, "yyrr", T}, // no minimum: young is yes
	}
	for _, tt := range tests {
		name := tt.policy + "/" + tt.votes + "/" + tt.minDur.String()
		if tt.unreachableIsFailure {
			name += "/unreachable-is-failure"
		}
		t.Run(name, func(t *testing.T) {
			p, err := ParsePolicy(tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			p.MinDuration, p.UnreachableIsFailure = tt.minDur, tt.unreachableIsFailure
			d := p.Decide(votes(tt.votes))
			if d.Result != tt.want {
				t.Fatalf("Decide = %s (%s), want %s; tally %+v", d.Result, d.Reason, tt.want, d)
			}
			if d.Reason == "" {
				t.Fatal("decision without a reason")
			}
			if d.Yes+d.Young+d.No+d.StandAside != len(tt.votes) {
				t.Fatalf("tally %+v does not add up to %d answers", d, len(tt.votes))
			}
		})
	}
}

func TestZeroPolicyIsMajority(t *testing.T) {
	var p Policy
	if p.String() != "majority" {
		t.Fatalf("zero policy = %s", p)
	}
	if got := p.Decide(votes("yn")).Result; got != Untrusted {
		t.Fatalf("zero policy on a tie = %s", got)
	}
	if got := p.Decide(votes("yyn")).Result; got != Trusted {
		t.Fatalf("zero policy on 2 of 3 = %s", got)
	}
}

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{"majority", "majority", ""},
		{"Consensus", "consensus", ""},
		{" minority ", "minority", ""},
		{"quorum:0.75", "quorum:0.75", ""},
		{"quorum:1", "quorum:1", ""},
		{"quorum", "", "needs a fraction"},
		{"quorum:0", "", "not a number in (0, 1]"},
		{"quorum:1.5", "", "not a number in (0, 1]"},
		{"quorum:-1", "", "not a number in (0, 1]"},
		{"quorum:NaN", "", "not a number in (0, 1]"},
		{"quorum:x", "", "not a number in (0, 1]"},
		{"majority:2", "", "takes no argument"},
		{"plurality", "", "unknown policy"},
		{"", "", "unknown policy"},
	}
	for _, tt := range tests {
		p, err := ParsePolicy(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePolicy(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || p.String() != tt.want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %s", tt.in, p, err, tt.want)
		}
	}
}

func TestVoteJSON(t *testing.T) {
	for _, v := range []Vote{Yes, No, StandAside} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var got Vote
		if err := json.Unmarshal(b, &got); err != nil || got != v {
			t.Fatalf("round trip of %s via %s = %s, %v", v, b, got, err)
		}
	}
	var v Vote
	if err := json.Unmarshal([]byte(`"maybe"`), &v); err == nil {
		t.Fatal("unknown vote accepted")
	}
}
