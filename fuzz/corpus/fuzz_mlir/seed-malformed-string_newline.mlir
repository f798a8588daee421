module { "abc
" }