package corpus
import ("testing";"time";"context";"os";"github.com/pkie/pkie/internal/verify")
func TestTmpLimbo(t *testing.T){
 f,_:=os.Open("/tmp/limbo.json"); defer f.Close()
 c,err:=ReadLimbo(f,time.Now()); if err!=nil{t.Fatal(err)}
 t.Logf("%d cases %d skipped", len(c.Cases), len(c.Skipped))
 for _,s:=range c.Skipped{t.Log(s)}
 rep := Run(context.Background(), []verify.Backend{verify.NewGo(false), verify.NewGo(true)}, c.Cases, nil)
 rep.WriteText(testWriter{t}, 100)
}
type testWriter struct{t *testing.T}
func (w testWriter) Write(p []byte)(int,error){w.t.Log(string(p));return len(p),nil}
