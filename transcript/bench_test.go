package transcript_test

import (
	"context"
	"testing"

	"github.com/teambus/teambus/bus"
	"github.com/teambus/teambus/node/nodetest"
	"github.com/teambus/teambus/transcript"
)

// BenchmarkSync_20KB: one sync of 20 KB appended to a 10 MB transcript,
// over loopback TCP, transcript.Open included (as a hook does it).
func BenchmarkSync_20KB(b *testing.B) {
	n := nodetest.NewBareServer(b)
	ctx := context.Background()
	conn, err := bus.Connect(ctx, bus.ConnectConfig{Server: n.URL(), Token: n.Token()})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	t := &testing.T{}
	tf := &transcriptFile{t: t, path: b.TempDir() + "/t.jsonl"}
	tf.grow(10 << 20)
	s, err := transcript.Open(ctx, conn.JS, testTeam)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Sync(ctx, testMember, testSession, tf.path); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tf.grow(20 << 10)
		b.StartTimer()
		s, err := transcript.Open(ctx, conn.JS, testTeam)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Sync(ctx, testMember, testSession, tf.path); err != nil {
			b.Fatal(err)
		}
	}
}
