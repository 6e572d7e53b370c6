// Prints the invariant catalogue as the Markdown table of docs/spec.md; a test checks that the docs
// hold exactly this table, so the docs cannot drift from the catalogue.

#include <pfx/spec/catalogue.hpp>

#include <iostream>

int main() {
  std::cout << "| ID | name | statement |\n|---|---|---|\n";
  pfx::spec::for_each_invariant([](const auto& inv) {
    std::cout << "| " << inv.id << " | " << inv.name << " | " << inv.statement << " |\n";
  });
  return 0;
}
