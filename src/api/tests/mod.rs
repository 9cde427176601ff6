mod quantity;
mod text;
