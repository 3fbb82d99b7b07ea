package reconciler
import ("testing";"fmt";schema "github.com/meshgen/meshgen/catalog-schema")
func TestG(t *testing.T){ repo,err:=schema.LoadDir("../examples/lab"); if err!=nil{t.Fatal(err)}; res,err:=Resolve(repo,ResolveOptions{}); fmt.Println(err); for _,a:=range res.Assignments{fmt.Printf("%s seats=%v providers=%v waiting=%v serves=%d\n",a.ID,a.Assignment.Seats,a.Providers,a.Waiting,len(a.Serves)); for _,q:=range a.Definition.Requires{fmt.Printf("   req %s %s %s %s\n",q.Name,q.Contract,q.Provider,q.Seat)}}}
