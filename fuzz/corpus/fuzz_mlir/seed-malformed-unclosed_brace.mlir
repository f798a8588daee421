module {
  func.func @f() {
  }
