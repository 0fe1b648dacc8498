// al_pg_test_cluster start|stop FILE: the PostgreSQL cluster a whole CTest
// run shares (the pg_cluster fixture of src/store/CMakeLists.txt).
// `start` starts one and describes it in FILE (PgTestCluster::Detach); when
// no cluster can run here it says why and exits 0 without writing FILE, so
// the tests start their own or skip with that reason. `stop` stops the
// cluster FILE names and deletes it.
#include <cstring>
#include <iostream>

#include "store/pg_test_cluster.h"

int main(int argc, char** argv) {
  using agentloop::store::PgTestCluster;
  if (argc != 3 || (std::strcmp(argv[1], "start") != 0 && std::strcmp(argv[1], "stop") != 0)) {
    std::cerr << "usage: al_pg_test_cluster start|stop FILE\n";
    return 2;
  }
  const std::filesystem::path file = argv[2];
  // A cluster left by an interrupted run is stopped first.
  agentloop::Status stopped = PgTestCluster::StopDetached(file);
  if (!stopped.ok()) {
    std::cerr << "al_pg_test_cluster: " << stopped.ToString() << "\n";
    return 1;
  }
  if (std::strcmp(argv[1], "stop") == 0) return 0;
  auto cluster = PgTestCluster::Start();
  if (!cluster.ok()) {
    std::cout << "no PostgreSQL cluster for the run: " << cluster.error().ToString() << "\n";
    return 0;
  }
  agentloop::Status detached = (*cluster)->Detach(file);
  if (!detached.ok()) {
    std::cerr << "al_pg_test_cluster: " << detached.ToString() << "\n";
    return 1;
  }
  std::cout << "PostgreSQL cluster on 127.0.0.1:" << (*cluster)->port() << " ("
            << (*cluster)->dir().string() << "), described in " << file.string() << "\n";
  return 0;
}
